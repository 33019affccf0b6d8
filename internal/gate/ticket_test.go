package gate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// deviceHold takes a real ticket of device npu in dir, and keeps it for the
// test to look at.
type deviceHold struct {
	dir string
	mu  sync.Mutex
	t   *hold.Ticket
}

func (h *deviceHold) Acquire(ctx context.Context) (Ticket, error) {
	t, err := (&hold.Device{Dir: h.dir, Name: "npu", Command: "gate test"}).Acquire(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.t = t
	h.mu.Unlock()
	return t, nil
}

func (h *deviceHold) ticket() *hold.Ticket {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t
}

// othersWait reports whether another process asking for the device now
// would have to wait: the ticket's lock is seen from a description of its
// own, as another run sees it.
func othersWait(t *testing.T, dir string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	other, err := (&hold.Device{Dir: dir, Name: "npu", Command: "another run"}).Acquire(ctx)
	if err == nil {
		other.Release()
		return false
	}
	var te *hold.TimeoutError
	if !errors.As(err, &te) {
		t.Errorf("another run's Acquire = %v, want it to wait", err)
	}
	return true
}

// A serve that unlocks every file it inherited (flock LOCK_UN on fd 3 and
// up) cannot free the device: the ticket's descriptor stays with its
// supervisor, so another run asking for the device still waits while the
// gate measures, and the gate finds its lock held at the end.
func TestServeCannotFreeTheDevice(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, "--unlock-inherited", "--rate", "1000", "--first-token-ms", "0")
	p.Hold = "builtin"
	p.Replies, p.MaxReplies = 1, 1
	p.RateSource = judge.RateServer
	h := &deviceHold{dir: dir}
	var waited, asked bool
	log := lineWatcher{on: func(line string) {
		if strings.HasPrefix(line, "reply 1:") {
			asked, waited = true, othersWait(t, dir)
		}
	}}
	res, err := (&Gate{Plan: p, Log: &log, Hold: h}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(p.Out, "serve.log"))
	if !strings.Contains(string(b), "file(s) unlocked") || strings.Contains(string(b), dir) {
		t.Errorf("the serve unlocked the ticket (a file in %s), or did not try:\n%s", dir, b)
	}
	if !asked || !waited {
		t.Errorf("while the gate measured, another run got the device (asked %v, waited %v)", asked, waited)
	}
	if !res.Pass() || res.Hold.Lost != "" {
		t.Errorf("Run() = verdict %s, ticket lost %q; want pass, held to the end: %+v", res.Verdict, res.Hold.Lost, res.Assertions)
	}
}

// A ticket whose lock is dropped during the run (by anything that shares
// its descriptor) fails the run at its end, saying why: another run may
// have had the device while this one measured.
func TestLostTicketFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, "--rate", "1000", "--first-token-ms", "0")
	p.Hold = "builtin"
	p.Replies, p.MaxReplies = 1, 1
	p.RateSource = judge.RateServer
	h := &deviceHold{dir: dir}
	log := lineWatcher{on: func(line string) {
		if strings.HasPrefix(line, "serve: ready") {
			if err := dropLock(h.ticket().Files()[0]); err != nil {
				t.Errorf("unlock: %v", err)
			}
		}
	}}
	res, err := (&Gate{Plan: p, Log: &log, Hold: h}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass() || !strings.Contains(res.Hold.Lost, "was not locked any more") {
		t.Fatalf("Run() with the ticket unlocked = verdict %s, lost %q; want a fail saying the ticket was lost", res.Verdict, res.Hold.Lost)
	}
	last := res.Assertions[len(res.Assertions)-1]
	if last.Name != judge.Released || last.OK || !strings.Contains(last.Detail, "could not confirm that it held the device's ticket to the end") {
		t.Errorf("the last assertion = %+v, want release failed saying the ticket was lost", last)
	}
	for _, a := range res.Assertions[:len(res.Assertions)-1] {
		if !a.OK {
			t.Errorf("assertion %+v failed: only the release should", a)
		}
	}
	if got, err := report.Read(p.Out); err != nil || got.Hold.Lost != res.Hold.Lost {
		t.Errorf("result.json's hold.lost = %v, %v; want it kept", got, err)
	}
}
