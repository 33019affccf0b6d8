package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
