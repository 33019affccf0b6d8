//go:build unix

package gate

import (
	"context"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

// dropLock drops the ticket's lock through its descriptor (flock LOCK_UN),
// as anything that shares the descriptor can.
func dropLock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// A serve that stops its supervisor (SIGSTOP) after starting a detached
// helper: the supervisor is seen stopped at the stop and continued, so it
// kills the tree (no survivors) and releases the device; the run fails all
// the same, saying so.
func TestStoppedSupervisorIsContinued(t *testing.T) {
	p := plan(t, "--stop-parent", "--spawn-detached", "--model", "stopsup-"+strings.ReplaceAll(t.Name(), "/", "-"), "--rate", "1000", "--first-token-ms", "0")
	p.Replies, p.MaxReplies = 1, 1
	p.RateSource = judge.RateServer
	var log strings.Builder
	res, err := (&Gate{Plan: p, Log: &log}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Serve.SupervisorStopped == 0 || res.Serve.Survivors != 0 {
		t.Errorf("Run() = supervisor stopped %d times, %d survivors %q; want it seen stopped, and no survivors:\n%s", res.Serve.SupervisorStopped, res.Serve.Survivors, res.Serve.Left, log.String())
	}
	last := res.Assertions[len(res.Assertions)-1]
	if res.Pass() || last.Name != judge.Released || !strings.Contains(last.Detail, "supervisor was found stopped (SIGSTOP)") {
		t.Errorf("Run() = verdict %s, last assertion %+v; want a fail saying the supervisor was stopped", res.Verdict, last)
	}
	if strings.Contains(log.String(), "keeps killing them") {
		t.Errorf("the log says the supervisor keeps killing what survived:\n%s", log.String())
	}
}
