package supervise

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExitString(t *testing.T) {
	for _, tc := range []struct {
		exit Exit
		want string
	}{
		{Exit{Code: 3}, "exited with status 3"},
		{Exit{Code: 0, Stop: "TERM"}, "exited with status 0 on the gate's TERM"},
		{Exit{Code: -1, Signal: 15}, "killed by signal 15 (terminated)"},
		{Exit{Code: -1, Signal: 15, Stop: "TERM"}, "stopped by the gate (TERM)"},
		// TERM and KILL both sent: TERM may still be what ended it.
		{Exit{Code: -1, Signal: 15, Stop: "KILL"}, "stopped by the gate (TERM)"},
		{Exit{Code: -1, Signal: 9, Stop: "KILL"}, "stopped by the gate (KILL)"},
		// A KILL the gate did not send is someone else's.
		{Exit{Code: -1, Signal: 9, Stop: "TERM"}, "killed by signal 9 (killed)"},
		{Exit{Code: -1, Signal: 11, Stop: "TERM"}, "killed by signal 11 (segmentation fault)"},
		{Exit{Code: -1, Lost: "its supervisor (pid 7) was killed by signal 9 (killed)"}, "ended unseen: its supervisor (pid 7) was killed by signal 9 (killed)"},
	} {
		if got := tc.exit.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.exit, got, tc.want)
		}
	}
}

func TestNewExit(t *testing.T) {
	// Wait statuses as the kernel encodes them: status<<8, or the signal.
	for _, tc := range []struct {
		ws   syscall.WaitStatus
		stop string
		want Exit
	}{
		{3 << 8, "", Exit{Code: 3}},
		{syscall.WaitStatus(syscall.SIGTERM), "TERM", Exit{Code: -1, Signal: 15, Stop: "TERM"}},
	} {
		if got := NewExit(tc.ws, tc.stop); got != tc.want {
			t.Errorf("NewExit(%#x, %q) = %+v, want %+v", int(tc.ws), tc.stop, got, tc.want)
		}
	}
}

func TestCheckContain(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"", true}, {"auto", true}, {"cgroup2", true}, {"freezer", true}, {"descendants", true},
		{"cgroup", false}, {"Freezer", false}, {" auto", false},
	} {
		err := CheckContain(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("CheckContain(%q) = %v, want ok %v", tc.in, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), ContainEnv) {
			t.Errorf("CheckContain(%q) = %v, want it to name %s", tc.in, err, ContainEnv)
		}
	}
}

func TestUnder(t *testing.T) {
	for _, tc := range []struct{ mnt, root, rel, want string }{
		{"/sys/fs/cgroup", "/", "/system.slice/runner.service", "/sys/fs/cgroup/system.slice/runner.service"},
		{"/sys/fs/cgroup/unified", "/", "/", "/sys/fs/cgroup/unified"},
		// Inside a cgroup namespace the mount shows a subtree.
		{"/sys/fs/cgroup", "/docker/abc", "/docker/abc/job", "/sys/fs/cgroup/job"},
		{`/mnt/with space`, "/", "/a", "/mnt/with space/a"},
	} {
		if got := under(tc.mnt, tc.root, tc.rel); got != tc.want {
			t.Errorf("under(%q, %q, %q) = %q, want %q", tc.mnt, tc.root, tc.rel, got, tc.want)
		}
	}
	if got := unescape(`/mnt/with\040space`); got != "/mnt/with space" {
		t.Errorf(`unescape("/mnt/with\040space") = %q`, got)
	}
}

func TestChoose(t *testing.T) {
	c, _, err := choose("descendants", os.Getpid())
	if err != nil || c.name() != "descendants" || c.path() != "" {
		t.Errorf("choose(descendants) = %v, %v, want descendants", c, err)
	}
	if _, _, err := choose("bogus", os.Getpid()); err == nil {
		t.Error("choose(bogus): no error")
	}
	c, why, err := choose("auto", os.Getpid())
	if err != nil {
		t.Fatalf("choose(auto) = %v", err)
	}
	defer c.close()
	// What auto passed over, it says why.
	for i, m := range Mechanisms {
		if m == c.name() {
			if len(why) != i {
				t.Errorf("choose(auto) = %s with %d reasons (%q), want one for each before it", m, len(why), why)
			}
			break
		}
	}
}

// TestRootFrozenCgroupStopsARunaway: a cgroup is frozen before its members
// are counted and killed, so one kill is enough, however fast they fork.
func TestRootFrozenCgroupStopsARunaway(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("makes cgroups as root: needs root, and uid %d is not; run as root: go test -run '^TestRoot' ./internal/supervise", uid)
	}
	for _, m := range []string{"cgroup2", "freezer"} {
		t.Run(m, func(t *testing.T) {
			c, _, err := choose(m, os.Getpid())
			if err != nil {
				t.Skipf("not here: %v", err)
			}
			defer c.close()
			// A shell that keeps forking: each round leaves a sleeping
			// orphan behind.
			loop := `while :; do sh -c 'sleep 600 & exit' ; done`
			pid, err := c.start(func() (int, error) {
				return syscall.ForkExec("/bin/sh", []string{"sh", "-c", loop}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
			})
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Wait4(pid, nil, 0, nil)
			// Let it make a crowd of sleeping orphans. One member at a
			// time is passing (the sh -c between its start and its exit,
			// which may be gone before the freeze): 21 counted are 20
			// that stay.
			for deadline := time.Now().Add(time.Minute); c.members() < 21 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			seen := map[key]bool{}
			c.kill(seen)
			if len(seen) < 20 {
				t.Errorf("kill saw %d members, want the 20 or more that were there", len(seen))
			}
			for deadline := time.Now().Add(time.Minute); c.members() > 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := c.members(); n > 0 {
				t.Errorf("%d members left after one kill", n)
			}
		})
	}
}

// TestRootOwnNameTaken: a cgroup already named for this supervisor's pid
// (a serve whose user owns the parent can make one for every pid, to push
// each later run off cgroup2) is removed when empty, and the supervisor
// makes its own; with a process in it, the mechanism is refused, not
// shared. Kept from an attack on the supervisor's first stage.
func TestRootOwnNameTaken(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("makes cgroups as root: needs root, and uid %d is not; run as root: go test -run '^TestRoot' ./internal/supervise", uid)
	}
	// A pid of its own for the name: no live process has it, but the
	// check of stale cgroups must take it for alive, so the name is
	// this test's pid, which is alive.
	self := os.Getpid()
	probe, _, err := choose("cgroup2", self)
	if err != nil {
		t.Skipf("no cgroup2 here: %v", err)
	}
	dir := probe.path()
	if err := probe.close(); err != nil {
		t.Fatal(err)
	}
	// Empty, with an empty cgroup below it: removed, and made anew.
	if err := os.MkdirAll(filepath.Join(dir, "below"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, _, err := choose("cgroup2", self)
	if err != nil {
		os.Remove(filepath.Join(dir, "below"))
		os.Remove(dir)
		t.Fatalf("choose(cgroup2) with %s taken and empty: %v, want it made anew", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "below")); !os.IsNotExist(err) {
		t.Errorf("%s/below after the cgroup was made anew: %v, want it gone", dir, err)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	// With a process in it: refused.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		for range 100 {
			if os.Remove(dir) == nil || !fileExists(dir) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if c, _, err := choose("cgroup2", self); err == nil {
		c.close()
		t.Errorf("choose(cgroup2) with %s holding a process: made one, want it refused", dir)
	}
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// TestChooseFallsBack: where no cgroup can be made (a runner user with no
// cgroup of its own), auto holds the serve with descendants and says why
// each cgroup was not used; asked for by name, a cgroup that cannot be made
// is an error naming it.
func TestChooseFallsBack(t *testing.T) {
	refuse := func(why string) func(int) (*cgroup, error) {
		return func(int) (*cgroup, error) { return nil, errors.New(why) }
	}
	mk := makers{
		cgroup2: refuse("/sys/fs/cgroup/unified/ is not writable by uid 1001 (its cgroup is not delegated to it)"),
		freezer: refuse("/sys/fs/cgroup/freezer/ is not writable by uid 1001 (its cgroup is not delegated to it)"),
	}
	for _, want := range []string{"", "auto"} {
		c, why, err := mk.choose(want, os.Getpid())
		if err != nil {
			t.Fatalf("choose(%q) with no cgroup to be had = %v, want descendants", want, err)
		}
		wantWhy := []string{
			"cgroup2: /sys/fs/cgroup/unified/ is not writable by uid 1001 (its cgroup is not delegated to it)",
			"freezer: /sys/fs/cgroup/freezer/ is not writable by uid 1001 (its cgroup is not delegated to it)",
		}
		if c.name() != "descendants" || !slices.Equal(why, wantWhy) {
			t.Errorf("choose(%q) = %s, why %q; want descendants, why %q", want, c.name(), why, wantWhy)
		}
	}
	for _, m := range []string{"cgroup2", "freezer"} {
		if _, _, err := mk.choose(m, os.Getpid()); err == nil || !strings.Contains(err.Error(), ContainEnv+"="+m+": ") {
			t.Errorf("choose(%s) with no cgroup to be had = %v, want an error naming %s=%s", m, err, ContainEnv, m)
		}
	}
	// The first that works is taken, and only what came before it is said.
	mk.freezer = func(int) (*cgroup, error) { return &cgroup{kind: "freezer"}, nil }
	c, why, err := mk.choose("auto", os.Getpid())
	if err != nil || c.name() != "freezer" || len(why) != 1 || !strings.HasPrefix(why[0], "cgroup2: ") {
		t.Errorf("choose(auto) with a freezer = %v, why %q, %v; want freezer, one reason (cgroup2)", c, why, err)
	}
}

// TestNothingLeftWhenExited: a serve that leaves no child behind is the
// common end, and the supervisor knows nothing is left by the time it marks
// the serve exited, so the stop waiting on the exit runs no kill round (a
// freeze and a reading of /proc) for nothing.
func TestNothingLeftWhenExited(t *testing.T) {
	for i := range 20 {
		pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit 0"}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		s := newSupervisor(nil)
		s.serve = pid
		go s.reap()
		<-s.exited
		select {
		case <-s.empty:
		default:
			<-s.empty
			t.Fatalf("start %d: the serve was reaped with no child left, but the supervisor marked it exited before it knew none was left: the stop would run a kill round", i+1)
		}
		<-s.told
	}
}

// TestExitToldBeforeDone: the stop's report is the supervisor's last word.
// A serve that leaves nothing behind lets the stop finish the moment it is
// reaped, while the reaper is still telling the gate how it exited; a
// report sent first ends the supervisor before that, and the gate, told
// nothing of the exit, counts the serve lost ("ended unseen").
func TestExitToldBeforeDone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testHookBeforeExited = func() { time.Sleep(100 * time.Millisecond) }
	defer func() { testHookBeforeExited = func() {} }()
	s := newSupervisor(w)
	s.c = descendantsOnly{}
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit 0"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	s.serve = pid
	go s.reap()
	s.finish(time.Minute)
	<-s.told
	w.Close()
	var kinds []string
	dec := json.NewDecoder(r)
	for {
		var e Event
		if err := dec.Decode(&e); err != nil {
			break
		}
		kinds = append(kinds, e.Kind)
	}
	if want := []string{Exited, Done}; !slices.Equal(kinds, want) {
		t.Errorf("events %q, want %q: the gate is told of the exit before the stop's report", kinds, want)
	}
}

// TestReadProc: the whole file, as os.ReadFile reads it, in one read or
// several (a file past the first buffer), into a buffer of its own or one
// read into before (a ProcBuffer, after a larger file and before a smaller),
// and a clear error for none.
func TestReadProc(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("0123456789abcdef", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	buf := NewProcBuffer()
	defer buf.Release()
	for _, path := range []string{"/proc/self/stat", "/proc/self/status", big, "/proc/self/stat"} {
		for _, read := range []func(string) ([]byte, error){
			func(p string) ([]byte, error) { return ReadProc(p, nil) },
			buf.Read,
		} {
			got, err := read(path)
			want, werr := os.ReadFile(path)
			if err != nil || werr != nil {
				t.Fatalf("ReadProc(%s) error %v (os.ReadFile: %v)", path, err, werr)
			}
			// stat and status change between two reads (times, memory):
			// their first line and length are enough to tell a cut file.
			first := func(b []byte) string { l, _, _ := strings.Cut(string(b), "\n"); return l[:min(len(l), 20)] }
			if first(got) != first(want) || len(got) < len(want)*9/10 || len(got) > len(want)*11/10 || (path == big && string(got) != string(want)) {
				t.Errorf("ReadProc(%s) = %d bytes %q..., os.ReadFile %d bytes %q...", path, len(got), first(got), len(want), first(want))
			}
		}
	}
	if _, err := ReadProc("/proc/0/stat", nil); err == nil || !strings.Contains(err.Error(), "/proc/0/stat") {
		t.Errorf("ReadProc of no process: error %v, want one naming the file", err)
	}
}

// TestRemoveStale: the cgroups of supervisors that are gone are removed,
// with what their serves made below them; those of live processes and
// anything else are left; and one call does a bounded share of the work, so
// that a serve that leaves thousands of them holds no start or stop for
// long (each later supervisor removes its share).
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	// No process has a pid above the kernel's largest (4194304).
	const dead = 4194305
	mk := func(rel string) {
		if err := os.MkdirAll(filepath.Join(parent, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("npu-serve-smoke-" + strconv.Itoa(dead) + "/made-by-its-serve/deeper")
	mine := "npu-serve-smoke-" + strconv.Itoa(os.Getpid())
	mk(mine)
	mk("npu-serve-smoke-x")
	mk("other")
	if err := os.WriteFile(filepath.Join(parent, "npu-serve-smoke-"+strconv.Itoa(dead+1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removeStale(parent)
	got, _ := os.ReadDir(parent)
	var names []string
	for _, e := range got {
		names = append(names, e.Name())
	}
	want := []string{"npu-serve-smoke-" + strconv.Itoa(dead+1), mine, "npu-serve-smoke-x", "other"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("after removeStale: %q, want %q", names, want)
	}

	// Many: each call looks at 1,024 entries at most (staleBudget).
	const share = 1024
	many := t.TempDir()
	n := 3 * share
	for i := range n {
		if err := os.Mkdir(filepath.Join(many, "npu-serve-smoke-"+strconv.Itoa(dead+i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	left := n
	for call := 1; left > 0; call++ {
		removeStale(many)
		ents, _ := os.ReadDir(many)
		if removed := left - len(ents); removed < 1 || removed > share {
			t.Fatalf("call %d removed %d of %d stale cgroups, want 1 to %d", call, removed, left, share)
		}
		left = len(ents)
		if call > 10 {
			t.Fatalf("%d stale cgroups left after %d calls", left, call)
		}
	}
}
