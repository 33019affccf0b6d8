package serve

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// The test binary doubles as the serve and what the serve starts
// (SERVE_WIN_CHILD names what it does) and as a gate that holds a serve's
// job until it is killed (SERVE_WIN_CHILD=gate).
func TestMain(m *testing.M) {
	if mode := os.Getenv("SERVE_WIN_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	// A console for the serves to share, where the test has none (under
	// Wine, run from a shell): a CTRL_BREAK reaches only processes that
	// share the sender's console.
	allocConsole.Call()
	os.Exit(m.Run())
}

var allocConsole = windows.NewLazySystemDLL("kernel32.dll").NewProc("AllocConsole")

// child is the test binary as a serve, or as what a serve starts.
func child(mode string) int {
	self, _ := os.Executable()
	say := func(format string, a ...any) { fmt.Printf(format+"\n", a...) }
	breaks := make(chan os.Signal, 1)
	// CTRL_BREAK comes to a Go program as os.Interrupt; caught, it does
	// not end the process.
	signal.Notify(breaks, os.Interrupt)
	start := func(flags uint32) (*exec.Cmd, error) {
		c := exec.Command(self)
		c.Env = append(os.Environ(), "SERVE_WIN_CHILD=sleep")
		c.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags}
		return c, c.Start()
	}
	switch mode {
	case "sleep", "ignore":
		say("up %d", os.Getpid())
		select {}
	case "polite":
		say("up %d", os.Getpid())
		<-breaks
		say("CTRL_BREAK")
		return 3
	case "breakaway":
		// Out of its process group and out of the job, asked for; then out
		// of its process group alone.
		if c, err := start(windows.CREATE_BREAKAWAY_FROM_JOB | windows.CREATE_NEW_PROCESS_GROUP); err != nil {
			say("breakaway: refused: %v", err)
		} else {
			say("breakaway: started %d", c.Process.Pid)
		}
		c, err := start(windows.CREATE_NEW_PROCESS_GROUP)
		if err != nil {
			say("grandchild: %v", err)
			return 1
		}
		say("grandchild %d", c.Process.Pid)
		<-breaks
		say("CTRL_BREAK")
		return 3
	case "listen":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			say("listen: %v", err)
			return 1
		}
		say("port %d", ln.Addr().(*net.TCPAddr).Port)
		select {}
	case "ticket":
		// The ticket's handle, by its number in the gate: in this process
		// it is nothing, or another object, never the ticket's file.
		h, _ := strconv.ParseUint(os.Getenv("TICKET_HANDLE"), 10, 64)
		var fi windows.ByHandleFileInformation
		if err := windows.GetFileInformationByHandle(windows.Handle(h), &fi); err != nil {
			say("ticket: not held: %v", err)
		} else if id := fmt.Sprintf("%d:%d:%d", fi.VolumeSerialNumber, fi.FileIndexHigh, fi.FileIndexLow); id == os.Getenv("TICKET_ID") {
			say("ticket: HELD")
		} else {
			say("ticket: not held: handle %d is another file", h)
		}
		select {}
	case "mark":
		os.WriteFile(os.Getenv("MARK"), []byte("ran"), 0o644)
		select {}
	case "gate":
		// Holds a serve (which starts a grandchild) in its job, says the
		// job's members, and waits to be killed.
		p, err := Start(Options{Argv: []string{self}, Env: append(os.Environ(), "SERVE_WIN_CHILD=tree")})
		if err != nil {
			say("gate: %v", err)
			return 1
		}
		for deadline := time.Now().Add(30 * time.Second); len(p.Tree()) < 2; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				say("gate: the job holds %v, not the serve and its child, 30s on (%s)", p.Tree(), p.Exit())
				return 1
			}
		}
		say("members %s", strings.Trim(fmt.Sprint(p.Tree()), "[]"))
		select {}
	case "tree":
		if _, err := start(0); err != nil {
			return 1
		}
		select {}
	}
	return 2
}

// serveLog is a file for a serve's output, and a way to wait for a line.
type serveLog struct {
	t    *testing.T
	f    *os.File
	path string
}

func newLog(t *testing.T) *serveLog {
	path := filepath.Join(tempDir(t), "serve.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &serveLog{t, f, path}
}

// line waits for a line that starts with prefix and returns it.
func (l *serveLog) line(prefix string) string {
	l.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(l.path)
		for _, s := range strings.Split(string(b), "\n") {
			if s = strings.TrimSpace(s); strings.HasPrefix(s, prefix) {
				return s
			}
		}
	}
	b, _ := os.ReadFile(l.path)
	l.t.Fatalf("no line %q in the serve's log within 30s: %q", prefix, b)
	return ""
}

// tempDir is t.TempDir, emptied with os.Remove first: Wine refuses
// os.RemoveAll's way of removing a file ("Invalid function"). A process
// killed at the test's end may hold its log a moment longer.
func tempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			names, _ := os.ReadDir(dir)
			for _, n := range names {
				os.Remove(filepath.Join(dir, n.Name()))
			}
			if os.Remove(dir) == nil {
				return
			}
		}
	})
	return dir
}

func self(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// startMode starts the test binary as a serve in mode.
func startMode(t *testing.T, mode string, l *serveLog, env ...string) *Process {
	t.Helper()
	p, err := Start(Options{Argv: []string{self(t)}, Log: l.f, Env: append(append(os.Environ(), "SERVE_WIN_CHILD="+mode), env...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	return p
}

// open opens pid so that its end can be waited for, and its pid is not
// reused meanwhile; the test's end ends it, should a failed test leave it.
func open(t *testing.T, pid int) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	t.Cleanup(func() {
		windows.TerminateProcess(h, 1)
		windows.CloseHandle(h)
	})
	return h
}

// ended says whether the process of h ends within d.
func ended(h windows.Handle, d time.Duration) bool {
	ev, err := windows.WaitForSingleObject(h, uint32(d/time.Millisecond))
	return err == nil && ev == windows.WAIT_OBJECT_0
}

func pidAfter(t *testing.T, line, prefix string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.Fields(strings.TrimPrefix(line, prefix))[0])
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return pid
}

// TestBreakawayRefused: the serve asks to start a process out of its job
// (CREATE_BREAKAWAY_FROM_JOB) and is refused; the grandchild it starts in
// a process group of its own is in the job still, and ends at the stop.
func TestBreakawayRefused(t *testing.T) {
	l := newLog(t)
	p := startMode(t, "breakaway", l)
	away := l.line("breakaway:")
	t.Log(away)
	if !strings.HasPrefix(away, "breakaway: refused") {
		if pid, err := strconv.Atoi(strings.TrimPrefix(away, "breakaway: started ")); err == nil {
			terminate(pid)
		}
		t.Fatalf("the serve left its job: %s", away)
	}
	gc := pidAfter(t, l.line("grandchild"), "grandchild")
	h := open(t, gc)
	if tree := p.Tree(); !slices.Contains(tree, gc) || !slices.Contains(tree, p.PID()) {
		t.Fatalf("the job holds %v, not the serve %d and its grandchild %d", tree, p.PID(), gc)
	}
	st := p.Stop(time.Second)
	t.Logf("%+v", st)
	if !ended(h, 0) {
		t.Fatalf("the grandchild %d outlived the stop: %+v", gc, st)
	}
	if st.Survivors != 0 || st.Swept != 1 || st.Contain != "job" {
		t.Fatalf("stop: %+v, want 0 survivors, the grandchild swept, by the job", st)
	}
	if !strings.Contains(st.Polite, "CTRL_BREAK") {
		t.Fatalf("the polite stop is not said: %+v", st)
	}
}

// TestIgnoredBreakEndedWithTheJob: a serve that ignores the polite stop is
// ended by TerminateJobObject after the grace.
func TestIgnoredBreakEndedWithTheJob(t *testing.T) {
	l := newLog(t)
	p := startMode(t, "ignore", l)
	l.line("up")
	h := open(t, p.PID())
	st := p.Stop(200 * time.Millisecond)
	t.Logf("%+v", st)
	if !ended(h, 0) || st.Survivors != 0 {
		t.Fatalf("the serve outlived the stop: %+v", st)
	}
	if st.Signal != "TERMINATE" || st.Exit != "stopped by the gate (TERMINATE)" || p.ExitCode() != terminateCode {
		t.Fatalf("stop: %+v, exit code %d: want the serve ended by TerminateJobObject", st, p.ExitCode())
	}
	// The grace is waited for where the CTRL_BREAK was sent, skipped where
	// it could not be (no console shared, as under Wine).
	if sent := strings.HasPrefix(st.Polite, "CTRL_BREAK to"); sent && st.StopMS < 200 {
		t.Fatalf("stopped in %.0f ms, before the grace of 200 ms", st.StopMS)
	} else if !sent && st.StopMS >= 200 {
		t.Fatalf("stopped in %.0f ms: the grace was waited for with no CTRL_BREAK sent (%s)", st.StopMS, st.Polite)
	}
	if p.SupervisorRunning() || p.Tree() != nil {
		t.Fatal("the job is still held after the stop")
	}
	if again := p.Stop(time.Hour); again.StopMS != st.StopMS {
		t.Fatalf("a second stop did not return the first: %+v", again)
	}
}

// TestPoliteStop: where the serve shares the gate's console, CTRL_BREAK
// to its process group ends it, and no TerminateJobObject is needed.
func TestPoliteStop(t *testing.T) {
	l := newLog(t)
	p := startMode(t, "polite", l)
	l.line("up")
	st := p.Stop(10 * time.Second)
	t.Logf("%+v", st)
	if st.Survivors != 0 {
		t.Fatalf("survivors: %+v", st)
	}
	if !strings.HasPrefix(st.Polite, "CTRL_BREAK to process group") {
		t.Skipf("no console shared with the serve here (%s): the job ended it (%s)", st.Polite, st.Exit)
	}
	if st.Signal != "CTRL_BREAK" || st.Exit != "exited with status 3 on the gate's CTRL_BREAK" {
		t.Fatalf("stop: %+v: want the serve's own exit on CTRL_BREAK", st)
	}
}

// TestKilledHolderEndsTheJob: a process that holds a serve's job and is
// killed (TerminateProcess) takes the serve and its grandchild with it.
func TestKilledHolderEndsTheJob(t *testing.T) {
	gate := exec.Command(self(t))
	gate.Env = append(os.Environ(), "SERVE_WIN_CHILD=gate")
	out, err := gate.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	gate.Stderr = os.Stderr
	if err := gate.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "members ") {
		gate.Process.Kill()
		t.Fatalf("the gate said %q", sc.Text())
	}
	var hs []windows.Handle
	for _, f := range strings.Fields(strings.TrimPrefix(sc.Text(), "members ")) {
		pid, _ := strconv.Atoi(f)
		hs = append(hs, open(t, pid))
	}
	killed := time.Now()
	if err := gate.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	gate.Wait()
	for i, h := range hs {
		if !ended(h, 30*time.Second) {
			t.Fatalf("member %d of the killed gate's job is alive 30s on", i)
		}
	}
	t.Logf("the killed gate's job (%d processes) was empty %v after the kill", len(hs), time.Since(killed).Round(time.Millisecond))
}

// TestSurvivorNamed: a process of the job that does not die (a driver's
// wedge, which Wine cannot make: a process outside the job that the
// members' reading adds) is a survivor with its pid and image, and the
// stop returns at its bound.
func TestSurvivorNamed(t *testing.T) {
	stuck := exec.Command(self(t))
	stuck.Env = append(os.Environ(), "SERVE_WIN_CHILD=sleep")
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	defer stuck.Wait()
	defer stuck.Process.Kill()
	defer func(was func(windows.Handle) ([]int, error)) { jobMembers = was }(jobMembers)
	jobMembers = func(job windows.Handle) ([]int, error) {
		pids, err := queryJobMembers(job)
		return append(pids, stuck.Process.Pid), err
	}
	l := newLog(t)
	p := startMode(t, "ignore", l)
	l.line("up")
	st := p.stopWithin(50*time.Millisecond, 300*time.Millisecond)
	t.Logf("%+v", st)
	if st.Survivors != 1 || len(st.Left) != 1 || len(st.Survived) != 1 {
		t.Fatalf("stop: %+v, want the one that does not die", st)
	}
	img := strings.ToLower(self(t))
	if st.Survived[0].PID != stuck.Process.Pid || strings.ToLower(st.Survived[0].Command) != img {
		t.Fatalf("survivor %+v, want pid %d, image %s", st.Survived[0], stuck.Process.Pid, img)
	}
	if want := fmt.Sprintf("%d %s", stuck.Process.Pid, st.Survived[0].Command); st.Left[0] != want {
		t.Fatalf("left %q, want %q", st.Left[0], want)
	}
	if st.StopMS < 350 {
		t.Fatalf("the stop ended in %.0f ms, before its bound (350 ms) with a member alive", st.StopMS)
	}
	if st.Exit != "stopped by the gate (TERMINATE)" {
		t.Fatalf("the serve itself: %s", st.Exit)
	}
}

// TestListenersNameTheOwner: the TCP table names the serve as the owner of
// its listening socket; it is the serve's (in its job), and the test's own
// listener on another port is a stranger there. Wine 8's table names no
// owner (pid 0): there the check cannot be made, and passes.
func TestListenersNameTheOwner(t *testing.T) {
	l := newLog(t)
	p := startMode(t, "listen", l)
	port, _ := strconv.Atoi(strings.TrimPrefix(l.line("port"), "port "))
	owner, me := p.PID(), os.Getpid()
	if onWine() {
		t.Log("Wine: the TCP table names no owner; each is pid 0")
		owner, me = 0, 0
	}
	ls := Listeners(port)
	if len(ls) != 1 || ls[0].PID != owner {
		t.Fatalf("listeners of port %d: %v, want the serve, pid %d", port, ls, owner)
	}
	if err := p.CheckListener(port); err != nil {
		t.Fatal(err)
	}
	if err := CheckPortFree(port); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", owner)) {
		t.Fatalf("CheckPortFree(%d) = %v, want it in use by pid %d", port, err, owner)
	}
	mine, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer mine.Close()
	other := mine.Addr().(*net.TCPAddr).Port
	if ls := Listeners(other); len(ls) != 1 || ls[0].PID != me {
		t.Fatalf("listeners of [::1]:%d: %v, want this process, pid %d", other, ls, me)
	}
	if err := CheckPortFree(other); err == nil {
		t.Fatalf("CheckPortFree(%d) passed a port listened on at ::1", other)
	}
	if onWine() {
		return
	}
	err = p.CheckListener(other)
	if se, ok := err.(*StrangerError); !ok || len(se.Holders) != 1 || se.Holders[0].PID != me {
		t.Fatalf("CheckListener(%d) = %v, want this process named a stranger", other, err)
	}
}

// TestTCPTableOwners reads the owners of a port from tables laid out as
// GetExtendedTcpTable gives them (TCP_TABLE_OWNER_PID_LISTENER), IPv4 and
// IPv6: what Wine cannot show, a table with owners.
func TestTCPTableOwners(t *testing.T) {
	table := func(f tcpFamily, rows ...[2]int) []byte {
		b := make([]byte, 4+len(rows)*f.rowLen)
		b[0] = byte(len(rows))
		for i, r := range rows {
			row := b[4+i*f.rowLen:]
			row[f.at], row[f.at+1] = byte(r[0]>>8), byte(r[0]) // network order
			row[f.at+2], row[f.at+3] = 0xAA, 0xBB              // the DWORD's high bytes: not the port
			row[f.by], row[f.by+1], row[f.by+2] = byte(r[1]), byte(r[1]>>8), byte(r[1]>>16)
		}
		return b
	}
	for _, f := range tcpFamilies {
		b := table(f, [2]int{8080, 0x12345}, [2]int{8081, 7}, [2]int{8080, 9}, [2]int{8080, 0x12345}, [2]int{0x901F, 11})
		if got := f.owners(b, 8080, nil); !slices.Equal(got, []int{0x12345, 9}) {
			t.Errorf("af %d: owners of 8080 = %v, want [%d 9]", f.af, got, 0x12345)
		}
		if got := f.owners(b, 8081, []int{7}); !slices.Equal(got, []int{7}) {
			t.Errorf("af %d: owners of 8081 added to [7] = %v, want [7]", f.af, got)
		}
		if got := f.owners(b[:len(b)-1], 0x901F, nil); len(got) != 0 {
			t.Errorf("af %d: a cut last row read: %v", f.af, got)
		}
		if got := f.owners(b[:3], 8080, nil); len(got) != 0 {
			t.Errorf("af %d: a table shorter than its count: %v", f.af, got)
		}
	}
}

// TestPortsFromTheTable: FreePort gives a port nothing listens on, never
// twice, below Windows' dynamic range; CheckPortFree passes it, and fails
// it once something listens there.
func TestPortsFromTheTable(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] || port < FreeLow || port >= 49152 {
			t.Fatalf("FreePort gave %d (given before: %v), want a new one in [%d, 49152)", port, seen[port], FreeLow)
		}
		seen[port] = true
		if err := CheckPortFree(port); err != nil {
			t.Fatalf("CheckPortFree(%d) = %v, just after FreePort gave it", port, err)
		}
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	var pe *PortInUseError
	if err := CheckPortFree(port); !errors.As(err, &pe) || len(pe.Holders) != 1 {
		t.Fatalf("CheckPortFree(%d) = %v, want it in use by this process (listening on 0.0.0.0)", port, err)
	}
}

// TestTicketNotInherited: the ticket's handle, held by the gate, is no
// handle of the serve's.
func TestTicketNotInherited(t *testing.T) {
	ticket, err := os.Create(filepath.Join(tempDir(t), "ticket"))
	if err != nil {
		t.Fatal(err)
	}
	defer ticket.Close()
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(ticket.Fd()), &fi); err != nil {
		t.Fatal(err)
	}
	l := newLog(t)
	p, err := Start(Options{Argv: []string{self(t)}, Log: l.f, ExtraFiles: []*os.File{ticket}, Env: append(os.Environ(), "SERVE_WIN_CHILD=ticket",
		fmt.Sprintf("TICKET_HANDLE=%d", ticket.Fd()), fmt.Sprintf("TICKET_ID=%d:%d:%d", fi.VolumeSerialNumber, fi.FileIndexHigh, fi.FileIndexLow))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(0)
	if got := l.line("ticket:"); !strings.HasPrefix(got, "ticket: not held") {
		t.Fatalf("the serve: %s", got)
	} else {
		t.Log(got)
	}
}

// TestNotInTheJobNeverRuns: a serve that cannot be put in its job is ended
// before its first instruction, and Start says why.
func TestNotInTheJobNeverRuns(t *testing.T) {
	defer func(was func(windows.Handle, windows.Handle) error) { assignToJob = was }(assignToJob)
	assignToJob = func(windows.Handle, windows.Handle) error { return windows.ERROR_ACCESS_DENIED }
	mark := filepath.Join(tempDir(t), "ran")
	l := newLog(t)
	p, err := Start(Options{Argv: []string{self(t)}, Log: l.f, Env: append(os.Environ(), "SERVE_WIN_CHILD=mark", "MARK="+mark)})
	if err == nil {
		p.Stop(0)
		t.Fatal("Start succeeded with no job")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "could not be put in its Job Object, and was ended before it ran: AssignProcessToJobObject: "+windows.ERROR_ACCESS_DENIED.Error()) {
		t.Fatalf("Start: %v", err)
	}
	// Start waited for its end.
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the serve ran outside its job")
	}
}

// TestListDescendantsStat: the toolhelp snapshot has this process, its
// child below it, and the child's command line.
func TestListDescendantsStat(t *testing.T) {
	c := exec.Command(self(t), "-marker-for-list")
	c.Env = append(os.Environ(), "SERVE_WIN_CHILD=sleep")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill()
	var found bool
	for _, pr := range List() {
		if pr.PID == c.Process.Pid {
			found = true
			if pr.PPID != os.Getpid() || !strings.Contains(pr.Command, "-marker-for-list") || pr.Start == 0 {
				t.Fatalf("the child in List: %+v", pr)
			}
		}
	}
	if !found {
		t.Fatalf("the child, pid %d, is not in List", c.Process.Pid)
	}
	d := Descendants(os.Getpid())
	if len(d) < 2 || d[0].PID != os.Getpid() || !slices.ContainsFunc(d, func(pr Proc) bool { return pr.PID == c.Process.Pid }) {
		t.Fatalf("descendants %v: want this process, then its child %d", d, c.Process.Pid)
	}
	if pr, ok := Stat(c.Process.Pid); !ok || pr.PID != c.Process.Pid {
		t.Fatalf("Stat(%d) = %+v, %v", c.Process.Pid, pr, ok)
	}
}

func TestExitText(t *testing.T) {
	for _, c := range []struct {
		code uint32
		sent string
		want string
	}{
		{0, "", "exited with status 0"},
		{3, "", "exited with status 3"},
		{0xC0000005, "", "exited with status 0xC0000005"},
		{0xBFFFFFFF, "", "exited with status 3221225471"},
		{3, "CTRL_BREAK", "exited with status 3 on the gate's CTRL_BREAK"},
		{controlCExit, "CTRL_BREAK", "stopped by the gate (CTRL_BREAK)"},
		{controlCExit, "", "exited with status 0xC000013A"},
		{terminateCode, "TERMINATE", "stopped by the gate (TERMINATE)"},
		{terminateCode, "CTRL_BREAK", "exited with status 137 on the gate's CTRL_BREAK"},
		{terminateCode, "", "exited with status 137"},
	} {
		if got := exitText(c.code, c.sent); got != c.want {
			t.Errorf("exitText(%#x, %q) = %q, want %q", c.code, c.sent, got, c.want)
		}
	}
}
