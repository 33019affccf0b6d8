package hold

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as a contender (HOLD_CONTENDER=id): it takes the
// device, records when it held it, keeps it HOLD_FOR, releases it and exits.
// With HOLD_CHILD=1 it starts `sleep 600` holding the ticket's descriptors
// and prints its pid, then waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("HOLD_LINGER") == "1" {
		// A process that outlives a stop (see unhealthy_test.go).
		fmt.Println("lingering")
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	}
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
	d := tempDir(t)
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

func TestSetupErrors(t *testing.T) {
	file := filepath.Join(tempDir(t), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tt := range []struct {
		d    Device
		want string
	}{
		{Device{Dir: tempDir(t), Name: "../x"}, `device "../x"`},
		{Device{Dir: tempDir(t), Name: ""}, `device ""`},
		{Device{Dir: file, Name: "npu"}, "is not a directory"},
		{Device{Dir: file + "/sub", Name: "npu"}, "cannot be made"},
	} {
		if _, err := tt.d.Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Acquire(%+v) = %v, want %q", tt.d, err, tt.want)
		}
	}
	dir := filepath.Join(tempDir(t), "locks")
	d := &Device{Dir: dir, Name: "npu"}
	tk, err := d.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	checkShared(t, dir)
}

// tempDir is t.TempDir, emptied by removable before its own cleanup.
func tempDir(tb testing.TB) string {
	d := tb.TempDir()
	removable(tb, d)
	return d
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
	dir := tempDir(b)
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

// A device whose name starts with another's name and ".h." followed by a
// ticket number would have holding files that read as the other device's:
// holding npu.h.00000000000000000001 would show npu as held (and make its
// waiters wait). Such names are refused, naming the rule, and the other
// device stays free.
func TestDeviceNamesReadAsAnotherTicket(t *testing.T) {
	dir := tempDir(t)
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
