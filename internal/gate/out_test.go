package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// swapOutHold is a hold whose wait is a neighbour's chance: while the gate
// waits for the device, the out directory's path is made to lead
// elsewhere (the directory moved away, a new one in its place whose every
// file the gate writes is a symlink to the runner user's private file).
type swapOutHold struct {
	deviceHold
	out, victim string
}

func (h *swapOutHold) Acquire(ctx context.Context) (Ticket, error) {
	if err := os.Rename(h.out, h.out+".moved"); err != nil {
		return nil, err
	}
	if err := os.Mkdir(h.out, 0o755); err != nil {
		return nil, err
	}
	for _, name := range []string{report.LogFile, report.ResultFile, report.SummaryFile, "reply_1.json", "warmup_1.json"} {
		if err := os.Symlink(h.victim, filepath.Join(h.out, name)); err != nil {
			return nil, err
		}
	}
	return h.deviceHold.Acquire(ctx)
}

// The out directory is opened once, before the wait for the device: what
// its path leads to afterwards is never written, and no symlink is
// followed; the run's files are in the directory that was checked.
func TestOutOpenedOnce(t *testing.T) {
	p := plan(t, "--rate", "1000", "--first-token-ms", "0")
	p.Hold = "builtin"
	p.Replies, p.MaxReplies, p.Warmup = 1, 1, 1
	p.RateSource = judge.RateServer
	victim := filepath.Join(t.TempDir(), "private")
	if err := os.WriteFile(victim, []byte("the runner user's own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &swapOutHold{deviceHold: deviceHold{dir: t.TempDir()}, out: p.Out, victim: victim}
	res, err := (&Gate{Plan: p, Log: &strings.Builder{}, Hold: h}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "the runner user's own\n" {
		t.Errorf("the gate wrote through the neighbour's symlink into %s:\n%.300s", victim, b)
	}
	moved := p.Out + ".moved"
	for _, name := range []string{report.LogFile, report.ResultFile, report.SummaryFile, "reply_1.json", "warmup_1.json"} {
		fi, err := os.Lstat(filepath.Join(moved, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			t.Errorf("%s in the directory that was checked: %v, %v; want the run's file", name, fi, err)
		}
	}
	if !res.Pass() {
		t.Errorf("Run() = %s, want pass: %+v", res.Verdict, res.Assertions)
	}
}
