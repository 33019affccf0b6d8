package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// The test binary doubles as the serve's supervisor, as the simulated serve
// (FAKELLM=1) and as a gate that starts one and waits to be killed
// (SERVE_TEST_GATE=1).
func TestMain(m *testing.M) {
	switch {
	case len(os.Args) > 1 && os.Args[1] == supervise.Command:
		os.Exit(supervise.Main(os.Args[2:], os.Getenv, os.Stderr))
	case os.Getenv("FAKELLM") == "1":
		os.Exit(fakellm.Command(os.Args[1:], os.Stdout, os.Stderr))
	case os.Getenv("SERVE_TEST_GATE") == "1":
		gate()
		return
	case os.Getenv("SERVE_TEST_GATE") == "tree":
		treeGate()
		return
	}
	// A binary built with -race sleeps a second before it exits, to let
	// other goroutines report races: the supervisors and serves this
	// binary becomes have nothing to wait for, and a start's stop waits
	// for them.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	if err := BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// gate starts a serve, prints its pid and blocks until it is killed.
func gate() {
	p, err := Start(Options{Argv: []string{os.Args[0], "--port", os.Getenv("PORT"), "--spawn-detached"}, Env: append(os.Environ(), "FAKELLM=1", "SERVE_TEST_GATE=")})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(p.PID())
	select {}
}

func fake(t *testing.T, port int, args ...string) *Process {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	argv := append([]string{os.Args[0], "--port", strconv.Itoa(port)}, args...)
	p, err := Start(Options{Argv: argv, Log: log, Env: append(os.Environ(), "FAKELLM=1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func base(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

var autoPaths = []string{"/health", "/v1/health", "/api/v1/health"}

func TestReadyAndStop(t *testing.T) {
	port := freePort(t)
	p := fake(t, port, "--health-path", "/api/v1/health", "--ready-after", "100ms")
	r, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Minute)
	if err != nil {
		t.Fatalf("WaitReady() error = %v", err)
	}
	if r.Path != "/api/v1/health" || r.MS < 100 {
		t.Errorf("WaitReady() = %+v, want /api/v1/health after 100 ms or more", r)
	}
	if err := p.CheckListener(port); err != nil {
		t.Errorf("CheckListener() of the serve's own port = %v", err)
	}
	if p.Exit() != "" || p.ExitCode() != -1 {
		t.Errorf("Exit() of a running serve = %q, %d", p.Exit(), p.ExitCode())
	}
	st := p.Stop(10 * time.Second)
	if st.Signal != "TERM" || st.Exit != "exited with status 0 on the gate's TERM" || st.Survivors != 0 || st.Swept != 0 {
		t.Errorf("Stop() = %+v, want TERM, a clean exit, nothing swept or left", st)
	}
	if _, alive := Stat(p.PID()); alive {
		t.Errorf("pid %d still in /proc after Stop", p.PID())
	}
}

func TestNotReady(t *testing.T) {
	t.Run("never ready: the timeout names what health answered", func(t *testing.T) {
		port := freePort(t)
		p := fake(t, port, "--never-ready")
		listening(t, port)
		_, err := p.WaitReady(context.Background(), base(port), []string{"/health"}, 300*time.Millisecond)
		var nr *NotReadyError
		if !errors.As(err, &nr) || nr.Exited != "" || !strings.Contains(err.Error(), "not ready within 300ms (--ready-timeout); health answered /health: HTTP 503") {
			t.Errorf("WaitReady() error = %v, want a timeout naming HTTP 503", err)
		}
	})
	t.Run("exit at start fails at once, not at the timeout", func(t *testing.T) {
		port := freePort(t)
		p := fake(t, port, "--exit-at-start", "3")
		// An hour: a gate that waited for the timeout would hang the test.
		_, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Hour)
		var nr *NotReadyError
		if !errors.As(err, &nr) || nr.Exited != "exited with status 3" {
			t.Errorf("WaitReady() error = %v, want the serve's exit", err)
		}
		if p.ExitCode() != 3 {
			t.Errorf("ExitCode() = %d, want 3", p.ExitCode())
		}
		if st := p.Stop(time.Second); st.Signal != "" || st.Survivors != 0 {
			t.Errorf("Stop() of an exited serve = %+v, want no signal, no survivors", st)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		port := freePort(t)
		p := fake(t, port, "--never-ready")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := p.WaitReady(ctx, base(port), autoPaths, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitReady() after cancel = %v, want context.Canceled", err)
		}
	})
}

func TestStopContainment(t *testing.T) {
	t.Run("a serve that ignores TERM is killed", func(t *testing.T) {
		port := freePort(t)
		p := fake(t, port, "--ignore-term")
		if _, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Minute); err != nil {
			t.Fatal(err)
		}
		st := p.Stop(200 * time.Millisecond)
		if st.Signal != "KILL" || st.Exit != "stopped by the gate (KILL)" || st.Survivors != 0 {
			t.Errorf("Stop() = %+v, want KILL and no survivors", st)
		}
	})
	t.Run("a detached grandchild is swept", func(t *testing.T) {
		port := freePort(t)
		p := fake(t, port, "--spawn-detached")
		if _, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Minute); err != nil {
			t.Fatal(err)
		}
		// The helper is a shell and the sleep it starts: wait for both.
		var helpers []Proc
		for deadline := time.Now().Add(time.Minute); len(helpers) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			helpers = helpers[:0]
			for _, d := range Descendants(p.PID()) {
				if d.PID != p.PID() {
					helpers = append(helpers, d)
				}
			}
		}
		if len(helpers) != 2 || helpers[0].SID == p.PID() || helpers[0].SID != helpers[0].PID {
			t.Fatalf("no helper in a session of its own below pid %d: %+v", p.PID(), Descendants(p.PID()))
		}
		st := p.Stop(10 * time.Second)
		if st.Swept != len(helpers) || st.Survivors != 0 {
			t.Errorf("Stop() = %+v, want the %d helper processes swept and no survivors", st, len(helpers))
		}
		for _, h := range helpers {
			if pr, alive := Stat(h.PID); alive && pr.Start == h.Start && pr.State != 'Z' {
				t.Errorf("the detached helper %v survived Stop", pr)
			}
		}
	})
	t.Run("the gate killed: its serve dies with it", func(t *testing.T) {
		port := freePort(t)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "SERVE_TEST_GATE=1", "PORT="+strconv.Itoa(port))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		servePID, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("the gate said %q", line)
		}
		serveProc, _ := Stat(servePID)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if !gone(servePID, serveProc.Start, time.Minute) {
			syscall.Kill(servePID, syscall.SIGKILL)
			t.Errorf("serve pid %d outlived its gate", servePID)
		}
	})
}

// listening waits until something accepts connections on port.
func listening(t *testing.T, port int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on port %d after a minute", port)
}

// gone waits up to within for a process to leave /proc (or become a zombie).
func gone(pid int, start uint64, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		pr, ok := Stat(pid)
		if !ok || pr.Start != start || pr.State == 'Z' {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestPortProbeCopy: a process forked while CheckPortFree's probe of the
// port was open holds a copy of it (Go's os package forks one to check
// clone(CLONE_PIDFD), beside the gate's start): the gate waits for the copy
// to go, and names its holder only if it stays.
func TestPortProbeCopy(t *testing.T) {
	port := freePort(t)
	copies := make(chan *exec.Cmd, 1)
	afterProbe = func(ln net.Listener) {
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		c := exec.Command("sleep", "60")
		c.ExtraFiles = []*os.File{f}
		if err := c.Start(); err != nil {
			t.Error(err)
			return
		}
		copies <- c
	}
	t.Cleanup(func() { afterProbe = nil })
	// The hook runs inside the call, before it returns: its copy is in
	// the channel by the time the call waits or returns.
	copied := func() *exec.Cmd {
		t.Helper()
		select {
		case c := <-copies:
			t.Cleanup(func() { c.Process.Kill(); c.Wait() })
			return c
		default:
			t.Fatal("no copy of the probe was made")
			return nil
		}
	}
	reap := func(c *exec.Cmd) {
		c.Process.Kill()
		c.Wait()
	}
	t.Cleanup(func() {
		probeCopyWait = func() { time.Sleep(time.Millisecond) }
		probeCopyGone = 2 * time.Second
	})

	// The copy goes, once CheckPortFree has seen it: the port is free.
	var c *exec.Cmd
	probeCopyWait = func() {
		if c == nil {
			c = copied()
			reap(c)
		}
	}
	if err := CheckPortFree(port); err != nil || c == nil {
		if c == nil {
			c = copied()
		}
		t.Errorf("CheckPortFree(%d) with a copy of its probe held by pid %d until it looked = %v, want it to wait for the copy to go, then the port free", port, c.Process.Pid, err)
	}

	// FreePort, too, gives its port once its probe's copy is gone.
	c = nil
	free, err := FreePort()
	if c == nil {
		c = copied()
	}
	if err != nil || len(listeningSockets(free)) != 0 {
		t.Errorf("FreePort() = %d, %v, with a copy of its probe held by pid %d, listened on by %v; want it free", free, err, c.Process.Pid, Listeners(free))
	}

	// The copy stays: its holder is named, and FreePort gives no port.
	probeCopyWait = func() { time.Sleep(time.Millisecond) }
	probeCopyGone = 50 * time.Millisecond
	err = CheckPortFree(port)
	c = copied()
	var inUse *PortInUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (sleep 60)", c.Process.Pid)) {
		t.Errorf("CheckPortFree(%d) with a copy of its probe held by pid %d for good = %v, want that pid named", port, c.Process.Pid, err)
	}
	reap(c)
	free, err = FreePort()
	c = copied()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (sleep 60)", c.Process.Pid)) {
		t.Errorf("FreePort() with a copy of its probe held by pid %d for good = %d, %v; want an error naming it", c.Process.Pid, free, err)
	}
	reap(c)

	// A stranger on [::1] beside the copy: the stranger alone is named, at
	// once.
	ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port)))
	if err != nil {
		t.Skipf("no IPv6 listener on ::1 (%v)", err)
	}
	defer ln6.Close()
	probeCopyWait = func() { t.Error("CheckPortFree waited for its probe's copy beside a stranger") }
	err = CheckPortFree(port)
	c = copied()
	if !errors.As(err, &inUse) || len(inUse.Holders) != 1 || inUse.Holders[0].PID != os.Getpid() {
		t.Errorf("CheckPortFree(%d) with this test on [::1] and a copy of its probe held by pid %d = %v, want this test (pid %d) alone named", port, c.Process.Pid, err, os.Getpid())
	}
}

func TestPorts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	err = CheckPortFree(port)
	var inUse *PortInUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), fmt.Sprintf("port %d is in use by pid %d", port, os.Getpid())) || !strings.Contains(err.Error(), "pass --port 0") {
		t.Errorf("CheckPortFree(%d) = %v, want it in use by this test (pid %d)", port, err, os.Getpid())
	}
	free := freePort(t)
	if err := CheckPortFree(free); err != nil {
		t.Errorf("CheckPortFree(%d) of a free port = %v", free, err)
	}

	// A serve that is not what listens on the port.
	log, _ := os.Create(filepath.Join(t.TempDir(), "log"))
	defer log.Close()
	p, err := Start(Options{Argv: []string{"sleep", "60"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	err = p.CheckListener(port)
	var stranger *StrangerError
	if !errors.As(err, &stranger) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), "not by the serve the gate started") {
		t.Errorf("CheckListener(%d) = %v, want this test named as a stranger", port, err)
	}
}

func TestStartError(t *testing.T) {
	if _, err := Start(Options{Argv: []string{"/nonexistent/serve"}}); err == nil || !strings.Contains(err.Error(), "starting /nonexistent/serve") {
		t.Errorf("Start(missing) error = %v", err)
	}
	if _, err := Start(Options{}); err == nil {
		t.Error("Start(no argv): no error")
	}
}

func TestStat(t *testing.T) {
	p, ok := Stat(os.Getpid())
	if !ok || p.PID != os.Getpid() || p.PPID != os.Getppid() || p.State == 0 || p.Start == 0 || !strings.Contains(p.Command, filepath.Base(os.Args[0])) {
		t.Errorf("Stat(self) = %+v, %v", p, ok)
	}
	if _, ok := Stat(0); ok {
		t.Error("Stat(0) found a process")
	}
}

// A walk of /proc shared among goroutines reads every process, each once,
// in /proc's order: 40 children of this test, and the test itself, are all
// there, as they are read alone.
func TestSnapshotReadsEveryProcess(t *testing.T) {
	var kids []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range kids {
			c.Process.Kill()
			c.Wait()
		}
	})
	for range 40 {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, c)
	}
	all := snapshot()
	seen := map[int]int{}
	for i, p := range all {
		if p.PID == 0 || p.State == 0 || p.Start == 0 {
			t.Fatalf("snapshot()[%d] = %+v: not read", i, p)
		}
		if i > 0 && p.PID >= all[i-1].PID {
			t.Fatalf("snapshot() has %d after %d: not /proc's order, newest first", p.PID, all[i-1].PID)
		}
		seen[p.PID]++
	}
	for _, pid := range append([]int{os.Getpid(), os.Getppid()}, pidsOf(kids)...) {
		want, ok := stat(pid)
		if !ok {
			t.Fatalf("stat(%d): gone", pid)
		}
		got := slices.IndexFunc(all, func(p Proc) bool { return p.PID == pid })
		if got < 0 || seen[pid] != 1 {
			t.Errorf("process %d in snapshot() %d times, want once", pid, seen[pid])
			continue
		}
		// Its state may have changed between the two reads.
		if p := all[got]; p.PPID != want.PPID || p.PGID != want.PGID || p.SID != want.SID || p.Start != want.Start || p.Command != want.Command {
			t.Errorf("process %d in snapshot() = %#v, want %#v", pid, p, want)
		}
	}
}

func pidsOf(cmds []*exec.Cmd) []int {
	var pids []int
	for _, c := range cmds {
		pids = append(pids, c.Process.Pid)
	}
	return pids
}

// A supervisor being started is never taken for something a dead
// supervisor left behind (orphans, which the sweep kills and the stop
// counts as survivors), however the scan and the start interleave: gates
// that run serves side by side (the tests run four at a time) never count
// each other's supervisors.
func TestOrphansNeverHoldAStartingSupervisor(t *testing.T) {
	done := make(chan struct{})
	var seen []string
	scanned := make(chan int)
	go func() {
		n := 0
		defer func() { scanned <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, pr := range orphans(1) {
				if strings.Contains(pr.Command, supervise.Command) {
					seen = append(seen, pr.String())
				}
			}
			n++
		}
	}()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	// Ten starts: with the start outside the set's lock, scans took most
	// starts (23 of 30 at a load of 10) for orphans, the first within two.
	for range 10 {
		p, err := Start(Options{Argv: []string{"sleep", "30"}, Log: devNull})
		if err != nil {
			t.Fatal(err)
		}
		p.Stop(0)
	}
	close(done)
	n := <-scanned
	if len(seen) > 0 {
		t.Errorf("orphans() took %d starting supervisors for orphans (in %d scans): %s", len(seen), n, strings.Join(seen, "; "))
	}
}

// TestTree: the serve's tree is the serve and what it started, never its
// supervisor.
func TestTree(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p, err := Start(Options{Argv: []string{"sh", "-c", "sleep 60 & echo started; wait"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	var tree []int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if tree = p.Tree(); len(tree) == 2 {
			break
		}
	}
	if len(tree) != 2 || !slices.Contains(tree, p.PID()) || slices.Contains(tree, p.SupervisorPID()) {
		t.Errorf("Tree() = %v, want the serve %d and its child, not the supervisor %d", tree, p.PID(), p.SupervisorPID())
	}
}

// TestReadyPathNotFoundThenUp: a serve whose /health is mounted only once its
// model has loaded (404 until then), while every /v1/ path answers 401 (an
// API key's middleware, before routing): --health auto finds /health once it
// answers. (A path that answered 404 while another answered was once asked
// no more: this serve never became ready.)
func TestReadyPathNotFoundThenUp(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p, err := Start(Options{Argv: []string{"sleep", "600"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		n := asked[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/health" && n > 2:
			w.WriteHeader(http.StatusOK)
		case strings.HasPrefix(r.URL.Path, "/v1/"):
			w.WriteHeader(http.StatusUnauthorized)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	if r, err := p.WaitReady(context.Background(), srv.URL, autoPaths, time.Minute); err != nil || r.Path != "/health" {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("WaitReady() = %+v, %v; want ready on /health (asked %v)", r, err, asked)
	}
}

// Descendants finds the children each thread forked (the kernel lists a
// child under the thread that forked it) and theirs, as a walk of /proc
// finds them.
func TestDescendantsOfEveryThread(t *testing.T) {
	if !childrenFiles() {
		t.Skip("no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)")
	}
	var cmds []*exec.Cmd
	var mu sync.Mutex
	var started sync.WaitGroup
	hold := make(chan struct{})
	defer close(hold)
	tids := map[int]bool{}
	for i := range 4 {
		started.Add(1)
		go func() {
			// Each from a thread of its own, held until the test is done:
			// the child stays listed under it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cmd := exec.Command("sleep", "60")
			if i%2 == 1 {
				cmd = exec.Command("sh", "-c", "sleep 60 & echo started; wait")
			}
			out, _ := cmd.StdoutPipe()
			err := cmd.Start()
			if err == nil && i%2 == 1 {
				bufio.NewReader(out).ReadString('\n')
			}
			mu.Lock()
			if err != nil {
				t.Error(err)
			} else {
				cmds = append(cmds, cmd)
			}
			tids[unix.Gettid()] = true
			mu.Unlock()
			started.Done()
			<-hold
		}()
	}
	started.Wait()
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	if len(tids) != 4 {
		t.Fatalf("the children were started from %d threads, want 4", len(tids))
	}
	got := map[int]bool{}
	for _, pr := range Descendants(os.Getpid()) {
		got[pr.PID] = true
	}
	n := 0
	for _, c := range cmds {
		for _, pr := range below(snapshot(), c.Process.Pid) {
			n++
			if !got[pr.PID] {
				t.Errorf("Descendants misses %v, child %d or below it", pr, c.Process.Pid)
			}
		}
	}
	if n != 6 {
		t.Errorf("the walk found %d processes below the 4 children, want 6 (2 grandchildren)", n)
	}
}

// A child whose thread exits moves to another thread of its parent,
// perhaps one not yet read, or not yet listed when the threads were: a
// process whose threads keep handing their child on (testdata/handoff.c:
// each thread starts the next and exits) never hides it, nor what is
// below it, from Descendants.
func TestDescendantsThroughThreadHandoff(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a C build")
	}
	bin := filepath.Join(t.TempDir(), "handoff")
	if out, err := exec.Command("gcc", "-O2", "-pthread", "-o", bin, "testdata/handoff.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		for _, pr := range below(snapshot(), pid) {
			unix.Kill(pr.PID, unix.SIGKILL)
		}
		cmd.Wait()
	})
	bufio.NewReader(out).ReadString('\n')
	// The child and its grandchild, once both are there.
	for deadline := time.Now().Add(10 * time.Second); len(below(snapshot(), pid)) < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("below %d: %v, want it, its child and grandchild", pid, below(snapshot(), pid))
		}
	}
	missed := 0
	for range 500 {
		if len(Descendants(pid)) < 3 {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("Descendants missed the child or the grandchild of a process whose threads hand them on, %d times of 500", missed)
	}
}

func TestFreeRange(t *testing.T) {
	for _, tt := range []struct {
		ephemeral string
		lo, hi    int
	}{
		{"32768\t60999\n", FreeLow, 32768},
		{"21000 60999", FreeLow, 21000},
		{"20999 60999", 0, 0}, // less than 1000 ports below the range
		{"1024 65000", 0, 0},
		{"", 0, 0},
		{"x 60999", 0, 0},
		{"32768", 0, 0},
	} {
		if lo, hi := freeRange(tt.ephemeral); lo != tt.lo || hi != tt.hi {
			t.Errorf("freeRange(%q) = %d, %d; want %d, %d", tt.ephemeral, lo, hi, tt.lo, tt.hi)
		}
	}
}

// TestFreePortNeverTwice: runs of the gate side by side in one process are
// never given the same port, and the ports come from below the kernel's
// ephemeral range where it leaves room (the kernel hands a port just given
// back to the next bind to port 0).
func TestFreePortNeverTwice(t *testing.T) {
	lo, hi := freeRange(readFile("/proc/sys/net/ipv4/ip_local_port_range"))
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				port, err := FreePort()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[port] {
					t.Errorf("FreePort() gave %d twice", port)
				}
				seen[port] = true
				mu.Unlock()
				if hi > lo && (port < lo || port >= hi) {
					t.Errorf("FreePort() = %d, outside [%d, %d)", port, lo, hi)
				}
			}
		})
	}
	wg.Wait()
}
