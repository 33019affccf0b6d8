package serve

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// treePy is a serve whose tree leaves its process group: 20 children that
// close the descriptors they inherited (subprocess does by default), 4
// helpers in sessions of their own, and one that keeps forking and calling
// setsid, so that its pid never stays the same. Each names the marker
// given as its first argument.
const treePy = `import os, subprocess, sys, time

marker = sys.argv[1]
for i in range(20):
    subprocess.Popen(["child of " + marker, "600"], executable="sleep")
for i in range(4):
    subprocess.Popen(["helper of " + marker, "600"], executable="sleep", start_new_session=True)
RUNAWAY = """
import os, time
while True:
    if os.fork():
        os._exit(0)
    os.setsid()
    time.sleep(0.01)
"""
subprocess.Popen([sys.executable, "-c", RUNAWAY, "runaway of " + marker], start_new_session=True)
print("started", flush=True)
time.sleep(600)
`

// tree is a serve.py of treePy's in dir, and its log.
type tree struct {
	dir, marker, log string
}

func newTree(t testing.TB, marker string) tree {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tree.py"), []byte(treePy), 0o644); err != nil {
		t.Fatal(err)
	}
	// The pid keeps the marker apart from another run of these tests.
	marker = fmt.Sprintf("%s-%d", marker, os.Getpid())
	return tree{dir: dir, marker: marker, log: filepath.Join(dir, "serve.log")}
}

func (tr tree) argv() []string {
	return []string{"python3", filepath.Join(tr.dir, "tree.py"), tr.marker}
}

// started waits until the serve has started its whole tree.
func (tr tree) started(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(tr.log); strings.Contains(string(b), "started") {
			return
		}
	}
	b, _ := os.ReadFile(tr.log)
	t.Fatalf("the serve did not start its tree within a minute; its log:\n%s", b)
}

// alive is every live process whose command line names the marker.
func (tr tree) alive() []string {
	var out []string
	for _, p := range List() {
		if p.State != 'Z' && p.PID != os.Getpid() && strings.Contains(p.Command, tr.marker) {
			out = append(out, p.String())
		}
	}
	return out
}

// available is each containment mechanism this machine offers this
// process.
func available(t testing.TB) []string {
	var out []string
	for _, m := range supervise.Mechanisms {
		if err := supervise.Available(m); err != nil {
			t.Logf("%s: not here: %v", m, err)
			continue
		}
		out = append(out, m)
	}
	return out
}

// mechanisms is each mechanism the tests any user runs hold the serve
// with: what this user has. As root, only descendants: root's cgroups are
// the TestRoot tests' (CI runs those as root, the rest as a user).
func mechanisms(t testing.TB) []string {
	if os.Geteuid() != 0 {
		return available(t)
	}
	t.Log("as root, the cgroups are root's: the TestRoot tests hold the serve in them")
	return []string{"descendants"}
}

// rootMechanisms is each cgroup mechanism root has here, for the TestRoot
// tests; they skip, saying why, where the test does not run as root.
func rootMechanisms(t testing.TB) []string {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("holds the serve in cgroups root makes: needs root, and uid %d is not; run as root: go test -run '^TestRoot' ./internal/serve", uid)
	}
	var out []string
	for _, m := range available(t) {
		if m != "descendants" {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		t.Skip("root may make no cgroup here: no writable cgroup v2 and no cgroup v1 freezer mounted")
	}
	return out
}

func withContain(m string) []string {
	return append(os.Environ(), supervise.ContainEnv+"="+m)
}

func TestStopKillsTheTree(t *testing.T) {
	stopKillsTheTree(t, mechanisms(t))
}

func TestRootStopKillsTheTree(t *testing.T) {
	stopKillsTheTree(t, rootMechanisms(t))
}

func stopKillsTheTree(t *testing.T, ms []string) {
	for _, m := range ms {
		t.Run(m, func(t *testing.T) {
			tr := newTree(t, "stop-"+m+"-marker")
			log, err := os.Create(tr.log)
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			p, err := Start(Options{Argv: tr.argv(), Log: log, Env: withContain(m)})
			if err != nil {
				t.Fatal(err)
			}
			tr.started(t)
			if got, _, _ := p.Contain(); got != m {
				t.Errorf("Contain() = %s, want %s", got, m)
			}
			st := p.Stop(10 * time.Second)
			// The 5 helpers needed KILL; the children died of TERM with
			// the serve. The runaway may be counted more than once where
			// nothing freezes it.
			if st.Exit != "stopped by the gate (TERM)" || st.Signal != "TERM" || st.Swept < 5 || st.Survivors != 0 || st.Contain != m {
				t.Errorf("Stop() = %+v, want the serve stopped by TERM, 5 or more swept, no survivors, by %s", st, m)
			}
			if m != "descendants" && st.Swept > 6 {
				t.Errorf("Stop() swept %d from a frozen cgroup, want the 5 helpers (6 with the runaway caught in its fork)", st.Swept)
			}
			if left := tr.alive(); len(left) > 0 {
				t.Errorf("alive after Stop: %s", strings.Join(left, "; "))
				tr.kill() // not to be taken for another test's
			}
		})
	}
}

// TestSurvivorsReadFromProc stops a serve whose supervisor cannot act (it
// is stopped with SIGSTOP, and the stop leaves it so): the count comes from
// /proc, not from the supervisor's word. Let go, the supervisor then kills
// the tree. (A real stop continues a stopped supervisor: see the gate's
// TestStoppedSupervisorIsContinued.)
func TestSurvivorsReadFromProc(t *testing.T) {
	tr := newTree(t, "survivor-marker")
	log, err := os.Create(tr.log)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p, err := Start(Options{Argv: tr.argv(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	tr.started(t)
	syscall.Kill(p.SupervisorPID(), syscall.SIGSTOP)
	// Stopped once every thread is: until then one may still be running
	// (a signal is taken by one thread, which then stops the others), and
	// read the stop below, and stop the serve (its tree a set of zombies).
	waitStopped(t, p.SupervisorPID())
	p.leaveStopped = true
	st := p.stopWithin(time.Millisecond, 200*time.Millisecond)
	syscall.Kill(p.SupervisorPID(), syscall.SIGCONT)
	// The serve, its 20 children, 4 helpers, and the runaway, which can be
	// missed in the middle of its fork: the parent gone between the listing
	// (a walk of /proc, or the cgroup's) and the read of its facts.
	want := 25
	if st.Survivors < want || st.Survivors != len(st.Left) || !strings.HasPrefix(st.Exit, "still running") {
		t.Errorf("Stop() with the supervisor stopped = %d survivors, exit %q, want %d or more, still running: %s", st.Survivors, st.Exit, want, strings.Join(st.Left, "; "))
	}
	<-p.gone
	if left := tr.alive(); len(left) > 0 {
		t.Errorf("alive after the supervisor went on: %s", strings.Join(left, "; "))
	}
}

// waitStopped waits for every thread of pid to be stopped (state T).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			i := bytes.LastIndexByte(b, ')')
			if err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor, pid %d, not stopped 10 s after SIGSTOP", pid)
		}
	}
}

// TestStopStoppedSupervisor stops a serve whose supervisor the serve
// stopped (it runs as the supervisor's user): the gate continues it. (One
// stopped again whenever continued is not handled: killing it would free
// the device while the gate's sweep can still miss a runaway.)
func TestStopStoppedSupervisor(t *testing.T) {
	for _, again := range []bool{false} {
		t.Run(fmt.Sprintf("again=%v", again), func(t *testing.T) {
			tr := newTree(t, fmt.Sprintf("stopped-again-%v-marker", again))
			log, err := os.Create(tr.log)
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			p, err := Start(Options{Argv: tr.argv(), Log: log})
			if err != nil {
				t.Fatal(err)
			}
			tr.started(t)
			super := p.SupervisorPID()
			syscall.Kill(super, syscall.SIGSTOP)
			done := make(chan struct{})
			defer close(done)
			if again {
				go func() {
					for {
						select {
						case <-done:
							return
						case <-p.gone: // its pid may be another's now
							return
						case <-time.After(time.Millisecond):
							syscall.Kill(super, syscall.SIGSTOP)
						}
					}
				}()
			}
			if st := p.Stop(time.Second); st.Survivors != 0 {
				t.Errorf("Stop() with the supervisor stopped = %+v, want no survivors", st)
			}
			<-p.gone
			if left := tr.alive(); len(left) > 0 {
				t.Errorf("alive after Stop: %s", strings.Join(left, "; "))
				tr.kill() // not to be taken for another test's
			}
		})
	}
}

// kill kills what a failed test left of its tree.
func (tr tree) kill() {
	for range 100 {
		found := false
		for _, p := range List() {
			if p.State != 'Z' && p.PID != os.Getpid() && strings.Contains(p.Command, tr.marker) {
				syscall.Kill(p.PID, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// treeGate is a gate (SERVE_TEST_GATE=tree) that locks the file
// SERVE_TEST_LOCK and hands it to a tree serve as its ticket, with the
// mechanism in the environment; it prints the supervisor's pid and blocks
// until it is killed.
func treeGate() {
	lock, err := os.OpenFile(os.Getenv("SERVE_TEST_LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	log, err := os.OpenFile(os.Getenv("SERVE_TEST_LOG"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	p, err := Start(Options{Argv: strings.Fields(os.Getenv("SERVE_TEST_ARGV")), Log: log, ExtraFiles: []*os.File{lock}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(p.SupervisorPID())
	select {}
}

// killedGate starts a gate with a tree serve under mechanism m, SIGKILLs
// it once the tree is up, and takes the gate's lock, as the next run takes
// the device. It returns how long the lock took to be free after the kill,
// and what of the tree was alive at that moment.
func killedGate(t testing.TB, tr tree, m string) (free time.Duration, alive []string) {
	t.Helper()
	lockPath := filepath.Join(tr.dir, "ticket")
	os.Remove(tr.log)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(withContain(m), "SERVE_TEST_GATE=tree", "SERVE_TEST_LOCK="+lockPath, "SERVE_TEST_LOG="+tr.log, "SERVE_TEST_ARGV="+strings.Join(tr.argv(), " "))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	super, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the gate said %q", line)
	}
	tr.started(t)
	lock, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Fatal("the ticket is free while the gate runs")
	}
	// The next run, already waiting.
	got := make(chan time.Time, 1)
	go func() {
		unix.Flock(int(lock.Fd()), unix.LOCK_EX)
		got <- time.Now()
	}()
	killed := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	var at time.Time
	select {
	case at = <-got:
		alive = tr.alive()
	case <-time.After(time.Minute):
		t.Fatalf("the ticket was not free a minute after the gate was killed; alive: %s", strings.Join(tr.alive(), "; "))
	}
	// The supervisor came back to this process, a subreaper: reap it.
	unix.Wait4(super, nil, 0, nil)
	return at.Sub(killed), alive
}

func TestKilledGate(t *testing.T) {
	killedGateLeavesNone(t, mechanisms(t))
}

func TestRootKilledGate(t *testing.T) {
	killedGateLeavesNone(t, rootMechanisms(t))
}

func killedGateLeavesNone(t *testing.T, ms []string) {
	for _, m := range ms {
		t.Run(m, func(t *testing.T) {
			tr := newTree(t, "killed-"+m+"-marker")
			_, alive := killedGate(t, tr, m)
			if len(alive) > 0 {
				t.Errorf("the ticket was free while the killed gate's serve left %d alive: %s", len(alive), strings.Join(alive, "; "))
			}
			// Whatever was missed must not linger either.
			for _, p := range alive {
				pid, _ := strconv.Atoi(strings.Fields(strings.TrimPrefix(p, "pid "))[0])
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}

// TestServeThatExitsAtOnce: a serve may be gone before its supervisor has
// said it started; the gate still learns both, in that order. Thirty
// starts, three at a time (each start waits on its supervisor's start far
// more than it computes): with the started event sent after the reaper runs,
// about one start in six saw the exit first.
func TestServeThatExitsAtOnce(t *testing.T) {
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := w; i < 30; i += 3 {
				if !exitsAtOnce(t, i) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// exitsAtOnce is start i of TestServeThatExitsAtOnce; false when the
// start failed and the starts should stop.
func exitsAtOnce(t *testing.T, i int) bool {
	type result struct {
		p   *Process
		err error
	}
	started := make(chan result, 1)
	go func() {
		p, err := Start(Options{Argv: []string{"true"}})
		started <- result{p, err}
	}()
	var r result
	select {
	case r = <-started:
	case <-time.After(time.Minute):
		t.Errorf("start %d: Start has not returned after a minute", i)
		return false
	}
	if r.err != nil {
		t.Errorf("start %d: %v", i, r.err)
		return false
	}
	select {
	case <-r.p.Done():
	case <-time.After(time.Minute):
		t.Errorf("start %d: the serve's exit was not seen after a minute", i)
		r.p.Stop(time.Second)
		return false
	}
	if st := r.p.Stop(time.Second); st.Exit != "exited with status 0" || st.Signal != "" || st.Survivors != 0 {
		t.Errorf("start %d: Stop() = %+v, want an exit of its own", i, st)
	}
	return true
}

// TestRootFrozenSupervisorIsThawed: a serve whose user owns the cgroup
// above its own (as root here; the runner's user on a delegated machine)
// makes a cgroup there, moves its supervisor into it and freezes it, so
// that the supervisor stops nothing and keeps the device. The stop thaws it
// (SIGCONT does not), counts it as stopped, and leaves nothing alive,
// whichever stage started the serve. (Kept from an attack on the
// supervisor's first stage: before, the stop gave up after its bound with
// the serve alive and the supervisor frozen.)
func TestRootFrozenSupervisorIsThawed(t *testing.T) {
	rootCgroup2(t)
	parent := cgroupParent(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, tc := range []struct {
		name  string
		argv0 string
		env   []string
		early bool
	}{
		{"first stage", sh, env(supervise.ContainEnv, ""), true},
		{"supervisor", "sh", env("PATH", "rel:"+filepath.Dir(sh)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ice := filepath.Join(parent, "frozen-supervisor-"+strconv.Itoa(os.Getpid()))
			script := `mkdir "$0" && echo $PPID > "$0/cgroup.procs" && echo 1 > "$0/cgroup.freeze"; exec sleep 600`
			p, err := Start(Options{Argv: []string{tc.argv0, "-c", script, ice}, Env: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				// Whatever the outcome: thawed, back in its parent, and
				// the cgroup removed once the supervisor is gone.
				os.WriteFile(filepath.Join(ice, "cgroup.freeze"), []byte("0"), 0)
				for deadline := time.Now().Add(time.Minute); p.SupervisorRunning() && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				syscall.Rmdir(ice)
			}()
			if p.Early() != tc.early {
				t.Errorf("Early() = %v, want %v", p.Early(), tc.early)
			}
			frozen := false
			for deadline := time.Now().Add(time.Minute); !frozen && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				b, _ := os.ReadFile(filepath.Join(ice, "cgroup.events"))
				frozen = strings.Contains(string(b), "frozen 1")
			}
			if !frozen {
				t.Fatal("the serve did not freeze its supervisor within a minute")
			}
			st := p.Stop(time.Second)
			if st.Survivors != 0 || st.SupervisorStopped < 1 || p.SupervisorRunning() || st.Exit != "stopped by the gate (TERM)" {
				t.Errorf("Stop() = %+v, supervisor running after it: %v; want it thawed (counted), the serve stopped by TERM, nothing left", st, p.SupervisorRunning())
			}
		})
	}
}
