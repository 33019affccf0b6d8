package hold

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// linger starts a process that runs until the test kills it: a survivor.
func linger(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "HOLD_LINGER=1")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "lingering\n" {
		t.Fatalf("the lingering process said %q", l)
	}
	return cmd
}

func markers(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "npu.u.*"))
	return names
}

// A stop that left a process which could not be ended is said by status
// and to the next holder, naming the pid, its image and when, for as long
// as the process runs; once it is gone the marker is removed.
func TestNoteSurvivors(t *testing.T) {
	e := newEnv(t)
	p := linger(t)
	tk, err := e.device().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.Unhealthy) != 0 {
		t.Errorf("a first ticket's Unhealthy = %v, want none", tk.Unhealthy)
	}
	if err := tk.NoteSurvivors(nil); err != nil || len(markers(t, e.dir)) != 0 {
		t.Errorf("NoteSurvivors(none) = %v, markers %v: want nothing written", err, markers(t, e.dir))
	}
	before := time.Now()
	if err := tk.NoteSurvivors([]Survivor{{PID: p.Process.Pid, Image: "stuck-serve"}}); err != nil {
		t.Fatal(err)
	}
	if len(markers(t, e.dir)) != 1 {
		t.Fatalf("markers after NoteSurvivors = %v, want one", markers(t, e.dir))
	}
	st, err := e.device().Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unhealthy) != 1 || len(st.Unhealthy[0].Survivors) != 1 || st.Unhealthy[0].Survivors[0].PID != p.Process.Pid ||
		st.Unhealthy[0].Ticket != tk.Facts.Ticket || st.Unhealthy[0].Device != "npu" || st.Unhealthy[0].When.Before(before.Add(-time.Second)) {
		t.Errorf("Status().Unhealthy = %+v, want the survivor of ticket %d", st.Unhealthy, tk.Facts.Ticket)
	}
	if st.Unhealthy[0].Survivors[0].Started.IsZero() {
		t.Errorf("the survivor's start was not noted: %+v", st.Unhealthy[0].Survivors[0])
	}
	b, _ := json.Marshal(st)
	if !strings.Contains(string(b), `"unhealthy":[{"device":"npu"`) || !strings.Contains(string(b), `"image":"stuck-serve"`) {
		t.Errorf("status --json = %s, want the marker", b)
	}
	want := "the device may be unhealthy: pid " + strconv.Itoa(p.Process.Pid) + " (stuck-serve) could not be ended when ticket "
	if s := st.Unhealthy[0].String(); !strings.HasPrefix(s, want) || !strings.Contains(s, " UTC") {
		t.Errorf("String() = %q, want it to start %q and say when", s, want)
	}
	tk.Release()

	var log syncBuffer
	d := e.device()
	d.Log = &log
	next, err := d.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Unhealthy) != 1 || !strings.Contains(log.String(), "npu-hold: warning: npu: the device may be unhealthy: pid "+strconv.Itoa(p.Process.Pid)) {
		t.Errorf("the next ticket: Unhealthy %+v, log %q; want the marker said", next.Unhealthy, log.String())
	}
	next.Release()

	p.Process.Kill()
	p.Wait()
	eventually(t, "the survivor's end to clear the marker", func() bool {
		st, err := e.device().Status()
		return err == nil && len(st.Unhealthy) == 0 && len(markers(t, e.dir)) == 0
	})
}

// A marker names a process by its pid and its start: another process that
// has the pid since is not the survivor, and a marker that claims it is
// says nothing.
func TestUnhealthyPidReused(t *testing.T) {
	e := newEnv(t)
	p := linger(t)
	tk, err := e.device().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	if err := tk.NoteSurvivors([]Survivor{{PID: p.Process.Pid, Image: "old", Started: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	st, err := e.device().Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unhealthy) != 0 || len(markers(t, e.dir)) != 0 {
		t.Errorf("a marker of a pid that started since: Unhealthy %+v, files %v; want neither", st.Unhealthy, markers(t, e.dir))
	}
	s := Survivor{PID: p.Process.Pid}
	if !s.stillThere() {
		t.Errorf("a running survivor of unknown start is not there")
	}
	if started, ok := processStarted(p.Process.Pid); !ok || time.Since(started) > time.Minute || time.Since(started) < -time.Second {
		t.Errorf("processStarted(a process started now) = %v, %v", started, ok)
	} else {
		for _, d := range []time.Duration{-time.Second, time.Second} {
			if s := (Survivor{PID: p.Process.Pid, Started: started.Add(d)}); !s.stillThere() {
				t.Errorf("a survivor started %v from its noted start is not there: the start is read to a second", d)
			}
		}
		if s := (Survivor{PID: p.Process.Pid, Started: started.Add(-1100 * time.Millisecond)}); s.stillThere() {
			t.Errorf("a survivor started 1.1 s after its noted start is still there")
		}
		if s := (Survivor{PID: p.Process.Pid, Started: started.Add(1100 * time.Millisecond)}); s.stillThere() {
			t.Errorf("a survivor started 1.1 s before its noted start is still there")
		}
	}
	if (Survivor{PID: 0}).stillThere() || (Survivor{PID: -1}).stillThere() {
		t.Errorf("a survivor of no pid is there")
	}
	if (Survivor{PID: os.Getpid()}).stillThere() {
		t.Errorf("the process reading a marker is a survivor of it")
	}
}

// A marker is another user's words: its text is escaped and bounded, the
// device and ticket are its file's name's, and a file of another name is
// no marker.
func TestUnhealthyHostile(t *testing.T) {
	e := newEnv(t)
	p := linger(t)
	if err := e.device().CheckDir(); err != nil {
		t.Fatal(err)
	}
	var many []Survivor
	for range maxSurvivors + 5 {
		many = append(many, Survivor{PID: p.Process.Pid, Image: "\x1b[31mred\n::error::x" + strings.Repeat("y", 500)})
	}
	b, _ := json.Marshal(Unhealthy{Device: "other", Ticket: 99, User: "\x1b]0;x\x07", When: time.Now(), Survivors: many})
	for _, name := range []string{"npu.u.00000000000000000007", "npu.u.00000000000000000008.0123456789abcdef", "npu.u.0000000000000000009", "npu.u.00000000000000000010.x", "npux.u.00000000000000000011", "npu.h.00000000000000000012"} {
		if err := os.WriteFile(filepath.Join(e.dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(e.dir, "npu.u.00000000000000000013"), []byte("not json"), 0o644)
	st, err := e.device().Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unhealthy) != 2 || st.Unhealthy[0].Ticket != 7 || st.Unhealthy[1].Ticket != 8 {
		t.Fatalf("Status().Unhealthy = %d markers, want tickets 7 and 8 alone", len(st.Unhealthy))
	}
	u := st.Unhealthy[0]
	if u.Device != "npu" || len(u.Survivors) != maxSurvivors || u.Seen == nil {
		t.Errorf("a hostile marker: device %q, %d survivors, seen %v; want npu, %d, its owner", u.Device, len(u.Survivors), u.Seen, maxSurvivors)
	}
	if s := u.String(); strings.ContainsAny(s, "\x1b\n\x07") || len([]rune(u.Survivors[0].Image)) > maxShown {
		t.Errorf("a hostile marker prints %q", s)
	}
}

func TestParseMarker(t *testing.T) {
	for _, c := range []struct {
		name string
		n    uint64
		ok   bool
	}{
		{"npu.u.00000000000000000042", 42, true},
		{"npu.u.00000000000000000042.0123456789abcdef", 42, true},
		{"npu.u.00000000000000000042.0123456789abcde", 0, false},
		{"npu.u.00000000000000000042.0123456789abcdefa", 0, false},
		{"npu.u.00000000000000000042x0123456789abcdef", 0, false},
		{"npu.u.00000000000000000042.0123456789ABCDEF", 0, false},
		{"npu.u.0000000000000000004", 0, false},
		{"npu.u.0000000000000000004x", 0, false},
		{"npu.q.00000000000000000042", 0, false},
		{"npu.h.00000000000000000042", 0, false},
		{"npu.u.00000000000000000042.u.00000000000000000001", 0, false},
		{"npux.u.00000000000000000042", 0, false},
		{"npu.u.99999999999999999999", 0, false},
	} {
		n, ok := parseMarker("npu", c.name)
		if n != c.n || ok != c.ok {
			t.Errorf("parseMarker(npu, %q) = %d, %v, want %d, %v", c.name, n, ok, c.n, c.ok)
		}
	}
	if markerName("npu", 42) != "npu.u.00000000000000000042" {
		t.Errorf("markerName(npu, 42) = %q", markerName("npu", 42))
	}
}

func TestParseSurvivors(t *testing.T) {
	got := ParseSurvivors([]string{"42 /usr/bin/flm serve --port 8000", "7", " 9  x.exe ", "0 zero", "-3 neg", "abc def", ""})
	want := []Survivor{{PID: 42, Image: "/usr/bin/flm serve --port 8000"}, {PID: 7}, {PID: 9, Image: "x.exe"}}
	if len(got) != len(want) {
		t.Fatalf("ParseSurvivors = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ParseSurvivors[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A marker's name taken by someone else is not replaced: the marker goes
// under the name with a suffix, and is read there.
func TestUnhealthyNameTaken(t *testing.T) {
	e := newEnv(t)
	p := linger(t)
	tk, err := e.device().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	taken := filepath.Join(e.dir, markerName("npu", tk.Facts.Ticket))
	if err := os.WriteFile(taken, []byte("squatted"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tk.NoteSurvivors([]Survivor{{PID: p.Process.Pid, Image: "stuck"}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(taken); string(b) != "squatted" {
		t.Errorf("the taken name now reads %q, want it left as it was", b)
	}
	st, err := e.device().Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unhealthy) != 1 || st.Unhealthy[0].Ticket != tk.Facts.Ticket || len(markers(t, e.dir)) != 2 {
		t.Errorf("Status().Unhealthy = %+v, files %v; want the marker under a suffixed name", st.Unhealthy, markers(t, e.dir))
	}
}
