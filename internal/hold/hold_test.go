package hold

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The test binary doubles as a contender (HOLD_CONTENDER=id): it takes the
// device, records when it held it, keeps it HOLD_FOR, releases it and exits.
// With HOLD_CHILD=1 it starts `sleep 600` holding the ticket's descriptors
// and prints its pid, then waits to be killed.
func TestMain(m *testing.M) {
	if id := os.Getenv("HOLD_CONTENDER"); id != "" {
		os.Exit(contender(id))
	}
	// A binary built with -race sleeps a second before it exits, to let
	// other goroutines report races: the contenders this binary becomes
	// have nothing to wait for, and the tests wait for their exits.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

func contender(id string) int {
	d := &Device{Dir: os.Getenv("HOLD_DIR"), Name: "npu", Command: "contender " + id, TokenFile: os.Getenv("HOLD_TOKEN")}
	if pool := os.Getenv("HOLD_POOL"); pool != "" {
		d.Pool = &Pool{Name: "npu"}
		for i, m := range strings.Split(pool, ",") {
			d.Pool.Members = append(d.Pool.Members, Member{Name: m, Index: strconv.Itoa(i)})
		}
		d.Count, _ = strconv.Atoi(os.Getenv("HOLD_COUNT"))
	}
	ctx := context.Background()
	if w, err := time.ParseDuration(os.Getenv("HOLD_WAIT")); err == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w)
		defer cancel()
	}
	t, err := d.Acquire(ctx)
	if err != nil {
		fmt.Println("error:", err)
		return 3
	}
	// Granted at Since: a grant that follows this one sees this holder's
	// file, written after Since.
	recordAt(id, "start", t.Facts.Since, t.Names())
	if os.Getenv("HOLD_CHILD") == "1" {
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "600"}, &os.ProcAttr{Files: append([]*os.File{nil, nil, nil}, t.Files()...)})
		if err != nil {
			fmt.Println("error:", err)
			return 3
		}
		fmt.Println("child", p.Pid)
		select {}
	}
	var witnesses []*os.File
	if dir := os.Getenv("HOLD_WITNESS"); dir != "" {
		for _, name := range t.Names() {
			w, err := witness(filepath.Join(dir, name), os.Getenv("HOLD_KILLED"))
			if err != nil {
				fmt.Println("double hold:", err)
				return 4
			}
			witnesses = append(witnesses, w)
		}
	}
	hold, _ := time.ParseDuration(os.Getenv("HOLD_FOR"))
	time.Sleep(hold)
	record(id, "end")
	// A holder that is not killed lets its witnesses go before its ticket.
	for _, w := range witnesses {
		w.Close()
	}
	if err := t.Release(); err != nil {
		fmt.Println("error:", err)
		return 3
	}
	return 0
}

// witness takes the exclusive flock of a device's witness file, which only
// a holder of the device takes, without waiting: a holder finds it taken
// only while another holds the device too. Only a holder the test killed
// (its pid in the killed file, written before the kill) may still have it:
// its ticket and its witness go as it exits, in no order the kernel
// promises, so the witness is then waited for.
func witness(path, killed string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			return f, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return nil, err
		}
		pid := flockers()[fileID{st.Dev, st.Ino}]
		if pid == 0 {
			continue // let go between the try and the look
		}
		b, _ := os.ReadFile(killed)
		if !slices.Contains(strings.Fields(string(b)), strconv.Itoa(pid)) {
			return nil, fmt.Errorf("%s is held by pid %d, which was not killed, while this holder (pid %d) holds the device", filepath.Base(path), pid, os.Getpid())
		}
		if err := flock(f, unix.LOCK_EX); err != nil {
			return nil, err
		}
		return f, nil
	}
}

func record(id, what string) { recordAt(id, what, time.Now(), nil) }

func recordAt(id, what string, at time.Time, devices []string) {
	f, err := os.OpenFile(os.Getenv("HOLD_RECORD"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(f, "%s %s %d %s\n", id, what, at.UnixNano(), strings.Join(devices, ","))
	f.Close()
}

type env struct {
	dir, record, token string
}

func newEnv(t *testing.T) env {
	d := t.TempDir()
	return env{dir: filepath.Join(d, "locks"), record: filepath.Join(d, "record"), token: filepath.Join(d, "NPU-TOKEN")}
}

func (e env) start(t *testing.T, id string, extra ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "HOLD_CONTENDER="+id, "HOLD_DIR="+e.dir, "HOLD_RECORD="+e.record, "HOLD_TOKEN="+e.token)
	cmd.Env = append(cmd.Env, extra...)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

func (e env) device() *Device { return &Device{Dir: e.dir, Name: "npu"} }

// hasTicket says whether the contender started with this command holds
// or waits: a ticket whose facts name it.
func (e env) hasTicket(command string) bool {
	st, err := e.device().Status()
	if err != nil {
		return false
	}
	if st.Holder != nil && st.Holder.Command == command {
		return true
	}
	return slices.ContainsFunc(st.Queue, func(f Facts) bool { return f.Command == command })
}

// recorded says whether contender id has recorded what (start, end).
func (e env) recorded(id, what string) bool {
	b, _ := os.ReadFile(e.record)
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, id+" "+what+" ") {
			return true
		}
	}
	return false
}

// eventually waits up to a minute for cond: processes on a loaded machine
// take their time, and the test asserts order, never speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("after a minute: %s", what)
}

type event struct {
	id      string
	what    string
	at      int64
	devices []string
}

func events(t *testing.T, path string) []event {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		at, _ := strconv.ParseInt(f[2], 10, 64)
		ev := event{id: f[0], what: f[1], at: at}
		if len(f) > 3 {
			ev.devices = strings.Split(f[3], ",")
		}
		out = append(out, ev)
	}
	return out
}

func TestFirstComeFirstServed(t *testing.T) {
	e := newEnv(t)
	var cmds []*exec.Cmd
	for i := range 10 {
		cmd, _ := e.start(t, strconv.Itoa(i), "HOLD_FOR=30ms")
		cmds = append(cmds, cmd)
		// The next starts once this one has its ticket: one after another.
		// Its arrival is known from its own ticket (its facts, holding or
		// waiting) or, once it has held and gone, from its own start in
		// the record; never from counts, which a holder that has recorded
		// its end but not yet released would fill twice.
		id := strconv.Itoa(i)
		eventually(t, fmt.Sprintf("contender %d has its ticket", i), func() bool {
			return e.hasTicket("contender "+id) || e.recorded(id, "start")
		})
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("contender %d: %v", i, err)
		}
	}
	evs := events(t, e.record)
	if len(evs) != 20 {
		t.Fatalf("%d events, want 20: %v", len(evs), evs)
	}
	for i := range 10 {
		s, en := evs[2*i], evs[2*i+1]
		if s.id != strconv.Itoa(i) || s.what != "start" || en.id != s.id || en.what != "end" {
			t.Errorf("events %d, %d = %v, %v; want contender %d's start then end: the order of arrival, one at a time", 2*i, 2*i+1, s, en, i)
		}
		if i > 0 && s.at < evs[2*i-1].at {
			t.Errorf("contender %d started before contender %d ended: two held at once", i, i-1)
		}
	}
	if _, err := os.Stat(e.token); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the token file is left after every release: %v", err)
	}
}

func TestHolderKilledHandsOver(t *testing.T) {
	e := newEnv(t)
	a, _ := e.start(t, "a", "HOLD_FOR=10m")
	eventually(t, "a holds", func() bool { return strings.Contains(readFile(e.record), "a start") })
	// The token file holds the holder's facts.
	var facts Facts
	if err := json.Unmarshal([]byte(readFile(e.token)), &facts); err != nil || facts.PID != a.Process.Pid || facts.Command != "contender a" || facts.Since.IsZero() {
		t.Errorf("token file = %q (%v), want a's facts", readFile(e.token), err)
	}
	b, _ := e.start(t, "b", "HOLD_FOR=0s")
	eventually(t, "b waits", func() bool {
		st, _ := e.device().Status()
		return st != nil && len(st.Queue) == 1 && st.Queue[0].Command == "contender b"
	})
	st, _ := e.device().Status()
	if !st.Held || st.Holder == nil || st.Holder.PID != a.Process.Pid || !slices.Contains(st.Lockers, a.Process.Pid) {
		t.Errorf("Status() = %+v, want a holding and b queued", st)
	}
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	if err := b.Wait(); err != nil {
		t.Errorf("b after a was killed: %v", err)
	}
	if !strings.Contains(readFile(e.record), "b start") {
		t.Errorf("b never held the device after its holder died:\n%s", readFile(e.record))
	}
	// a's token, stale once a was killed, was replaced by b's, which b
	// removed at its release.
	if _, err := os.Lstat(e.token); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the token file after b released = %q (%v), want none", readFile(e.token), err)
	}
	st, _ = e.device().Status()
	if st.Held || st.Holder != nil || len(st.Queue) != 0 {
		t.Errorf("Status() after all = %+v, want free", st)
	}
}

func TestWaiterTimesOut(t *testing.T) {
	e := newEnv(t)
	a, _ := e.start(t, "a", "HOLD_FOR=10m")
	eventually(t, "a holds", func() bool { return strings.Contains(readFile(e.record), "a start") })
	d := e.device()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := d.Acquire(ctx)
	var te *TimeoutError
	if !errors.As(err, &te) || te.Holder == nil || te.Holder.PID != a.Process.Pid {
		t.Fatalf("Acquire() = %v, want a timeout naming a", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "gave up waiting for npu after") || !strings.Contains(msg, fmt.Sprintf("(pid %d, \"contender a\") since", a.Process.Pid)) {
		t.Errorf("error = %q", msg)
	}
	if st, _ := d.Status(); len(st.Queue) != 0 {
		t.Errorf("the timed-out waiter is still queued: %+v", st.Queue)
	}
}

func TestEscapedChildKeepsTheDevice(t *testing.T) {
	e := newEnv(t)
	a, out := e.start(t, "a", "HOLD_CHILD=1")
	line, _ := out.ReadString('\n')
	child, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "child "))
	if err != nil {
		t.Fatalf("a said %q", line)
	}
	defer syscall.Kill(child, syscall.SIGKILL)
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	st, _ := e.device().Status()
	if !st.Held || !slices.Contains(st.Lockers, child) {
		t.Errorf("Status() after the holder died = %+v, want the device held by its child %d", st, child)
	}
	d := e.device()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = d.Acquire(ctx)
	cancel()
	if err == nil {
		t.Fatal("Acquire() succeeded while an escaped child held the ticket")
	}
	syscall.Kill(child, syscall.SIGKILL)
	syscall.Wait4(child, nil, 0, nil)
	tk, err := d.Acquire(context.Background())
	if err != nil {
		t.Fatalf("Acquire() once the child died: %v", err)
	}
	tk.Release()
}

func TestSetupErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tt := range []struct {
		d    Device
		want string
	}{
		{Device{Dir: t.TempDir(), Name: "../x"}, `device "../x"`},
		{Device{Dir: t.TempDir(), Name: ""}, `device ""`},
		{Device{Dir: file, Name: "npu"}, "is not a directory"},
		{Device{Dir: file + "/sub", Name: "npu"}, "cannot be made"},
	} {
		if _, err := tt.d.Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Acquire(%+v) = %v, want %q", tt.d, err, tt.want)
		}
	}
	dir := filepath.Join(t.TempDir(), "locks")
	d := &Device{Dir: dir, Name: "npu"}
	tk, err := d.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("%s mode = %v, want 1777 so every user can queue", dir, fi.Mode())
	}
}

func TestWaiterSaysWhereItStands(t *testing.T) {
	e := newEnv(t)
	a, _ := e.start(t, "a", "HOLD_FOR=10m")
	eventually(t, "a holds", func() bool { return strings.Contains(readFile(e.record), "a start") })
	var log syncBuffer
	d := &Device{Dir: e.dir, Name: "npu", Log: &log, Every: 20 * time.Millisecond, Remind: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		eventually(t, "two progress lines", func() bool { return strings.Count(log.String(), "\n") >= 2 })
		cancel()
	}()
	_, err := d.Acquire(ctx)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire() after cancel = %v", err)
	}
	want := fmt.Sprintf("npu-hold: waiting for npu: place 2 in the queue (1 ahead); held by %s (pid %d, \"contender a\") since", userName(), a.Process.Pid)
	if !strings.HasPrefix(log.String(), want) {
		t.Errorf("progress = %q, want lines starting %q", log.String(), want)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// BenchmarkHandOver is the time from a holder's release to the next
// holder's start, over b.N hand-overs between contenders that each open the
// device's files on their own (as processes do): the median and the worst.
func BenchmarkHandOver(b *testing.B) {
	dir := b.TempDir()
	n := max(b.N, 2)
	released := make([]time.Time, n)
	acquired := make([]time.Time, n)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	first, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			t, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
			if err != nil {
				b.Error(err)
				return
			}
			acquired[i] = time.Now()
			released[i] = time.Now()
			t.Release()
		}()
	}
	close(ready)
	// Let every contender queue, then start the chain.
	for d := (&Device{Dir: dir, Name: "npu"}); ; time.Sleep(time.Millisecond) {
		if st, _ := d.Status(); st != nil && len(st.Queue) == n-1 {
			break
		}
	}
	released[0] = time.Now()
	first.Release()
	wg.Wait()
	b.StopTimer()
	// Each acquire follows the release just before it in time.
	var gaps []float64
	order := make([]int, 0, n)
	for i := 1; i < n; i++ {
		order = append(order, i)
	}
	slices.SortFunc(order, func(x, y int) int { return acquired[x].Compare(acquired[y]) })
	prev := released[0]
	for _, i := range order {
		gaps = append(gaps, float64(acquired[i].Sub(prev).Microseconds())/1000)
		prev = released[i]
	}
	slices.Sort(gaps)
	b.ReportMetric(gaps[len(gaps)/2], "median-ms")
	b.ReportMetric(gaps[len(gaps)-1], "worst-ms")
}

func TestDoctor(t *testing.T) {
	root := t.TempDir()
	mk := func(path, text string) {
		p := filepath.Join(root, path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(text), 0o644)
	}
	lockDir := filepath.Join(root, "run/lock/npu-hold")

	cs := Doctor(root, lockDir, 8<<20)
	want := []Check{
		{"FAIL", "no device node /dev/accel/accel*: load the NPU driver (modprobe amdxdna, or intel_vpu) and check the NPU is enabled in the firmware setup"},
		{"warn", "memlock limit: 8192 KiB; NPU runtimes pin buffers and want it unlimited: LimitMEMLOCK=infinity in the runner's systemd unit, or '* - memlock unlimited' in /etc/security/limits.d/"},
		{"FAIL", "lock directory " + lockDir + " does not exist: create it for every boot with the systemd-tmpfiles line 'd " + lockDir + " 1777 root root -' (docs/runner.md)"},
	}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("Doctor() of a machine without an NPU (-want +got):\n%s", diff)
	}

	mk("dev/accel/accel0", "")
	mk("sys/class/accel/accel0/device/fw_version", "1.0.0.166\n")
	mk("sys/class/accel/accel0/device/vbnv", "RyzenAI-npu5\n")
	mk("sys/module/amdxdna/version", "2.19.0\n")
	os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers/amdxdna"), 0o755)
	os.Symlink("../../../../bus/pci/drivers/amdxdna", filepath.Join(root, "sys/class/accel/accel0/device/driver"))
	os.MkdirAll(lockDir, 0o755)
	cs = Doctor(root, lockDir, unix.RLIM_INFINITY)
	want = []Check{
		{"ok", "/dev/accel/accel0 opens (amdxdna 2.19.0, RyzenAI-npu5, firmware 1.0.0.166)"},
		{"ok", "memlock limit: unlimited"},
		{"FAIL", "lock directory " + lockDir + " is mode drwxr-xr-x, want drwxrwxrwt (1777) so every user and runner can queue: chmod 1777 " + lockDir},
	}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("Doctor() of an NPU machine (-want +got):\n%s", diff)
	}
	os.Chmod(lockDir, 0o777|os.ModeSticky)
	mk("dev/accel/accel1", "")
	cs = Doctor(root, lockDir, unix.RLIM_INFINITY)
	if cs[1] != (Check{"ok", "/dev/accel/accel1 opens (unknown driver, firmware version not in sysfs (dmesg shows it at load))"}) || cs[3] != (Check{"ok", "lock directory " + lockDir + " is shared (1777)"}) {
		t.Errorf("Doctor() = %v", cs)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	if cs := Doctor(root, file, unix.RLIM_INFINITY); cs[len(cs)-1].Level != "FAIL" || !strings.Contains(cs[len(cs)-1].What, "is not a directory") {
		t.Errorf("Doctor() of a file as the lock directory = %v", cs[len(cs)-1])
	}
	if os.Geteuid() != 0 {
		os.Chmod(filepath.Join(root, "dev/accel/accel0"), 0o000)
		if cs := Doctor(root, lockDir, unix.RLIM_INFINITY); cs[0].Level != "FAIL" || !strings.Contains(cs[0].What, "usermod -aG render") {
			t.Errorf("Doctor() of an unopenable node = %v", cs[0])
		}
	}
}

// A device whose name starts with another's name and ".h." followed by a
// ticket number would have holding files that read as the other device's:
// holding npu.h.00000000000000000001 would show npu as held (and make its
// waiters wait). Such names are refused, naming the rule, and the other
// device stays free.
func TestDeviceNamesReadAsAnotherTicket(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"npu.h.00000000000000000001", "npu.q.00000000000000000001", "npu.h.x"} {
		d := &Device{Dir: dir, Name: name, Command: "the other device"}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tk, err := d.Acquire(ctx)
		cancel()
		if err == nil {
			defer tk.Release()
		}
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("device %q: a device name may not hold", name)) || !strings.Contains(err.Error(), `read as those of "npu"`) {
			t.Errorf("Acquire(%s) = %v, want it refused naming the rule", name, err)
		}
		if _, err := d.Status(); err == nil {
			t.Errorf("Status(%s) = nil error, want the name refused", name)
		}
		st, err := (&Device{Dir: dir, Name: "npu"}).Status()
		if err != nil || st.Held {
			t.Errorf("npu's Status() after asking for %s = %+v, %v; want free", name, st, err)
		}
	}
	for _, name := range []string{"npu", "npu.0", "npu-h-1", "npu.hq.1", "npu.h"} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", name, err)
		}
	}
}

// Held checks the lock from a description of its own: a lock dropped
// through a shared descriptor is seen, and so is a lock that another
// process took after it was dropped. A check on the holder's own
// description would take the lock again and see nothing.
func TestTicketHeld(t *testing.T) {
	dir := t.TempDir()
	tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	if err := tk.Held(); err != nil {
		t.Fatalf("Held() of a fresh ticket = %v, want nil", err)
	}
	if err := tk.Held(); err != nil {
		t.Fatalf("Held() again = %v, want nil: the check leaves the lock as it was", err)
	}
	// A process that shares the descriptor (a serve that inherited it)
	// unlocks it.
	shared, err := unix.Dup(int(tk.Files()[0].Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(shared)
	if err := unix.Flock(shared, unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := tk.Held(); err == nil || !strings.Contains(err.Error(), "was not locked any more: a process that shared its descriptor unlocked it") {
		t.Errorf("Held() after LOCK_UN through a shared descriptor = %v, want it lost", err)
	}
	if err := tk.Held(); err == nil {
		t.Errorf("Held() checked twice = nil: the first check kept a lock")
	}
	// Another process takes the unlocked file's lock.
	name := filepath.Join(dir, tk.name)
	other := exec.Command("flock", "--exclusive", name, "sh", "-c", "echo locked; exec sleep 60")
	out, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Skipf("no flock(1): %v", err)
	}
	defer func() {
		other.Process.Kill()
		other.Wait()
	}()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := tk.Held(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("not by its holder (pid %d): its lock was dropped and taken again", os.Getpid())) {
		t.Errorf("Held() with the lock taken by pid %d = %v, want it named", other.Process.Pid, err)
	}
}

// Without /proc, Held opens the ticket anew by its name, and only while it
// is still the ticket's own file: a description of its own, on which the
// holder's lock is seen.
func TestTicketReopenByName(t *testing.T) {
	dir := t.TempDir()
	tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	var st unix.Stat_t
	if err := unix.Fstat(int(tk.Files()[0].Fd()), &st); err != nil {
		t.Fatal(err)
	}
	fd, err := tk.reopenByName(&st)
	if err != nil {
		t.Fatalf("reopenByName() = %v", err)
	}
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("a shared lock on the reopened ticket = %v, want EWOULDBLOCK while held", err)
	}
	unix.Close(fd)
	// Another file under the ticket's name (only its owner could put it
	// there) is not the ticket.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, filepath.Join(dir, tk.name)); err != nil {
		t.Fatal(err)
	}
	if fd, err := tk.reopenByName(&st); err == nil || !strings.Contains(err.Error(), "was replaced in the lock directory by another file") {
		if err == nil {
			unix.Close(fd)
		}
		t.Errorf("reopenByName() of a replaced ticket = %v, want it refused", err)
	}
}

// A process of the holder's user (the serve) cannot unlock the holder's
// description, but it can take the holding file's name away: removed,
// renamed, or renamed away and back. A waiter then sees no holder and is
// granted the device while the first still holds it. Held must see each of
// these, even when the name is back in place at the check.
func TestTicketNameTakenAway(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(dir, ticket string) error
		back func(dir, ticket string) error // once the second run is done
	}{
		{"removed", func(dir, tk string) error { return os.Remove(filepath.Join(dir, tk)) }, nil},
		{"renamed", func(dir, tk string) error { return os.Rename(filepath.Join(dir, tk), filepath.Join(dir, "x")) }, nil},
		{"renamed and back", func(dir, tk string) error { return os.Rename(filepath.Join(dir, tk), filepath.Join(dir, "x")) },
			func(dir, tk string) error { return os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, tk)) }},
		{"linked elsewhere and back", func(dir, tk string) error {
			if err := os.Link(filepath.Join(dir, tk), filepath.Join(dir, "x")); err != nil {
				return err
			}
			return os.Remove(filepath.Join(dir, tk))
		}, func(dir, tk string) error {
			if err := os.Link(filepath.Join(dir, "x"), filepath.Join(dir, tk)); err != nil {
				return err
			}
			return os.Remove(filepath.Join(dir, "x"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Release()
			if err := tc.do(dir, tk.name); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			second, err := (&Device{Dir: dir, Name: "npu"}).Acquire(ctx)
			cancel()
			if err == nil {
				// The attack's effect: two holders of one device. The
				// second run ends before the name is put back.
				second.Release()
			}
			if tc.back != nil {
				if err := tc.back(dir, tk.name); err != nil {
					t.Fatal(err)
				}
			}
			if err := tk.Held(); err == nil {
				t.Errorf("Held() after its holding file was %s = nil, want the ticket lost (second Acquire: %v)", tc.name, err)
			}
		})
	}
}

// A lock directory of the holder's own user (NPU_HOLD_DIR, shared by its
// runner instances) can be renamed by the serve: the next waiter makes the
// directory anew, finds no holder, and is granted the device.
func TestTicketDirTakenAway(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	second, serr := (&Device{Dir: dir, Name: "npu"}).Acquire(ctx)
	cancel()
	if serr == nil {
		second.Release()
	}
	if err := tk.Held(); err == nil || !strings.Contains(err.Error(), "is not the directory the ticket npu.h.00000000000000000001 was taken in") {
		t.Errorf("Held() after its lock directory was renamed = %v, want the ticket lost (second Acquire: %v)", err, serr)
	}
}

// TestOutsideNS: in a user namespace, a file whose owner it does not map
// shows as the overflow uid, root's as anyone's.
func TestOutsideNS(t *testing.T) {
	for _, c := range []struct {
		uid              uint32
		uidMap, overflow string
		want             bool
	}{
		{65534, "         0          0 4294967295\n", "65534\n", false}, // no user namespace
		{65534, "      1000      65534          1\n", "65534\n", true},  // a runner's own namespace
		{1000, "      1000      65534          1\n", "65534\n", false},
		{65534, "         0     100000      65536\n", "65534\n", true}, // a pod's (hostUsers: false)
		{65533, "         0     100000      65536\n", "65533\n", true},
		{65534, "         0     100000      65536\n", "65533\n", false},
		{65534, "         0     100000      65536\n", "", true}, // the kernel's default
		{65534, "", "65534\n", false},                           // no /proc: nothing said
	} {
		if got := outsideNS(c.uid, c.uidMap, c.overflow); got != c.want {
			t.Errorf("outsideNS(%d, %q, %q) = %v, want %v", c.uid, c.uidMap, c.overflow, got, c.want)
		}
	}
}
