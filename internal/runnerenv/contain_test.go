//go:build linux

package runnerenv

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRootNoCgroup: the ordinary runner, a user whose cgroup is not its own
// (this machine as it is): the serve is held by descendants, and the run
// says why neither cgroup was used.
func TestRootNoCgroup(t *testing.T) {
	needRoot(t)
	s := newSite(t)
	r := s.runner()
	uid := "not writable by uid " + strconv.Itoa(runnerUID)
	noCgroup := want{contain: "descendants", why: []string{"cgroup2: ", "freezer: ", uid}}
	t.Run("run", func(t *testing.T) {
		s.checkPass(t, r, s.runGate(t, r, "out"), noCgroup)
	})
	t.Run("killed", func(t *testing.T) {
		s.killedGate(t, r)
	})
}

// killedGate starts the gate in r with a serve that never gets ready, kills
// the gate with SIGKILL once the serve's helpers run, and checks that the
// ticket comes free with nothing of the run left.
func (s site) killedGate(t *testing.T, r runner) {
	t.Helper()
	gate, npuHold := binaries(t)
	os.Remove(filepath.Join(s.work, "started"))
	runner := r
	if r.pid1 {
		runner.linger = filepath.Join(s.work, "runner-up")
		if err := os.WriteFile(runner.linger, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(runner.linger)
	}
	cmd := runner.command(s.gateArgs(gate, filepath.Join(s.work, "killed"), "--never-ready")...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var said syncBuffer
	ended := make(chan struct{})
	go func() {
		lines(bufio.NewReader(pipe), &said)
		close(ended)
	}()
	if !waitFor(func() bool { return s.started() || closed(ended) }) || !s.started() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the serve's helpers did not start (within a minute); the gate said:\n%s", said.String())
	}
	// The ticket is held while the gate runs.
	if code, _, _ := run(t, r.command(npuHold, "--wait", "100ms", "--", "true")); code != 75 {
		t.Errorf("npu-hold --wait 100ms while the gate runs = %d, want 75 (the device busy)", code)
	}
	// The mark finds the run's processes: the gate, its supervisor, the
	// serve, the helper and the runaway.
	if alive := marked(s.mark); len(alive) < 4 {
		t.Errorf("while the gate runs, %d processes carry the mark, want 4 or more: %s", len(alive), strings.Join(alive, "; "))
	}
	// The gate: the command itself, or, below a runner that stays PID 1
	// of its namespace, the runner's child.
	victim := cmd.Process.Pid
	if r.pid1 {
		victim = 0
		for _, p := range markedProcs(s.mark) {
			if strings.HasPrefix(p.cmd, gate+" run ") {
				victim = p.pid
			}
		}
		if victim == 0 {
			t.Fatalf("no gate among the run's processes: %s", strings.Join(marked(s.mark), "; "))
		}
	}
	killed := time.Now()
	syscall.Kill(victim, syscall.SIGKILL)
	if victim == cmd.Process.Pid {
		cmd.Wait()
	} else {
		// The runner stays until the ticket has been looked at.
		defer cmd.Wait()
		defer os.Remove(runner.linger)
	}
	code, _, stderr := run(t, r.command(npuHold, "--wait", "1m", "--", "true"))
	free := time.Since(killed)
	if code != 0 {
		t.Fatalf("npu-hold --wait 1m after the gate was killed = %d: %s", code, stderr)
	}
	t.Logf("the ticket was free %s after the gate was killed; npu-hold said: %s", free.Round(time.Millisecond), stderr)
	if left := marked(s.mark); len(left) > 0 {
		t.Errorf("alive once the ticket was free: %s", strings.Join(left, "; "))
	}
	if _, err := os.Stat(filepath.Join(s.work, "killed", "result.json")); err == nil {
		t.Error("the gate wrote result.json: it was not killed")
	}
	if !strings.Contains(said.String(), "serve: held by its supervisor") {
		t.Errorf("the gate did not say how its serve was held:\n%s", said.String())
	}
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
