package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// The serve cannot open what its supervisor talks to the gate on: a pipe
// it could, through /proc/PPID/fd/N (same user), and read the gate's stop
// or write events in the supervisor's name; a socket cannot be opened so.
func TestServeCannotOpenTheControlSocket(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	probe := `for fd in 3 4; do
	  l=$(readlink /proc/$PPID/fd/$fd)
	  if (exec 7</proc/$PPID/fd/$fd) 2>/dev/null || (exec 7>/proc/$PPID/fd/$fd) 2>/dev/null; then echo "opened $fd $l"; else echo "refused $fd $l"; fi
	done
	echo probed; exec sleep 60`
	// One held file: fd 4 is a ticket's, which the serve may open by
	// its path anyway.
	held, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	p, err := Start(Options{Argv: []string{"sh", "-c", probe}, Log: log, ExtraFiles: []*os.File{held}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(string(b), "probed"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the serve never probed:\n%s", b)
		}
		b, _ = os.ReadFile(log.Name())
	}
	if !strings.Contains(string(b), "refused 3 socket:") {
		t.Errorf("the serve opened its supervisor's fd 3, or it is no socket:\n%s", b)
	}
	if !strings.Contains(string(b), "4 /dev/null") {
		t.Errorf("the supervisor's fd 4 is not the held file:\n%s", b)
	}
}

// What comes on the socket after the supervisor's exit and report is taken
// once: a serve with a copy of the supervisor's end (pidfd_getfd, where it
// may trace its supervisor) that writes two exits crashed the gate ("close
// of closed channel"), with no verdict.
func TestListenTakesEachEventOnce(t *testing.T) {
	ctl, theirs, err := controlSocket()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{super: 1, done: make(chan struct{}), report: make(chan supervise.Report, 1), gone: make(chan struct{}), ended: make(chan struct{})}
	started := make(chan supervise.Event, 1)
	go p.listen(ctl, started)
	for _, line := range []string{
		`{"kind":"started","pid":42}`,
		`{"kind":"exited","exit":{"code":3}}`,
		`{"kind":"exited","exit":{"code":0}}`,
		`{"kind":"stopped","report":{"signal":"TERM","swept":1}}`,
		`{"kind":"stopped","report":{"signal":"","swept":0}}`,
		`{"kind":"exited","exit":{"code":7}}`,
	} {
		if _, err := theirs.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	theirs.Close()
	close(p.gone)
	<-p.ended
	if ev := <-started; ev.PID != 42 {
		t.Errorf("started = %+v", ev)
	}
	if p.Exit() != "exited with status 3" {
		t.Errorf("Exit() = %q, want the first exit's", p.Exit())
	}
	if r := <-p.report; r.Signal != "TERM" || r.Swept != 1 {
		t.Errorf("report = %+v, want the first", r)
	}
	select {
	case r := <-p.report:
		t.Errorf("a second report: %+v", r)
	default:
	}
}

// The stop's end of the gate's side (closeWrite) is the supervisor's end
// of file, and what it says after it is still read: a supervisor still
// killing a process stuck in a driver when the stop's bound ran out still
// tells how the serve ended.
func TestCloseWriteStillReads(t *testing.T) {
	ctl, theirs, err := controlSocket()
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	p := &Process{ctl: ctl, super: 1, done: make(chan struct{}), report: make(chan supervise.Report, 1), gone: make(chan struct{}), ended: make(chan struct{})}
	started := make(chan supervise.Event, 1)
	go p.listen(ctl, started)
	theirs.WriteString(`{"kind":"started","pid":42}` + "\n")
	<-started
	p.closeWrite()
	if n, err := theirs.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("the supervisor's end read %d, %v; want its end of file", n, err)
	}
	theirs.WriteString(`{"kind":"exited","exit":{"code":0,"signal":9,"stop":"KILL"}}` + "\n")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the exit written after closeWrite was not read")
	}
	if p.Exit() != "stopped by the gate (KILL)" {
		t.Errorf("Exit() = %q", p.Exit())
	}
	theirs.Close()
	close(p.gone)
	<-p.ended
}
