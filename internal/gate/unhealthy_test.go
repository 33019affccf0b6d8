//go:build unix

package gate

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// A stop that left a process which could not be ended marks the device
// before its ticket is released: npu-hold status and the next run say the
// device may be unhealthy, naming the pid and its command.
func TestSurvivorsMarkTheDevice(t *testing.T) {
	dir := t.TempDir()
	stuck := exec.Command("sleep", "60")
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stuck.Process.Kill(); stuck.Wait() }()
	h := &deviceHold{dir: dir}
	tk, err := h.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	g := &Gate{Plan: &config.Plan{Config: config.Config{Device: "npu", HoldTimeout: time.Minute}}, Log: &log}
	res := &report.Result{}
	res.Serve.Left = []string{fmt.Sprintf("%d sleep 60", stuck.Process.Pid)}
	g.releaseDevice(tk, res, res.Run.Started)
	if !strings.Contains(log.String(), "hold: npu marked as maybe unhealthy: 1 process(es) of the serve could not be ended") {
		t.Errorf("the gate's log = %q, want the device marked", log.String())
	}
	st, err := (&hold.Device{Dir: dir, Name: "npu"}).Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Held || len(st.Unhealthy) != 1 || st.Unhealthy[0].Survivors[0].PID != stuck.Process.Pid || st.Unhealthy[0].Survivors[0].Image != "sleep 60" {
		t.Errorf("status after the release = held %v, unhealthy %+v; want free, and the survivor named", st.Held, st.Unhealthy)
	}

	// The next run is told, and says so in result.json.
	g.Hold = h
	next := &report.Result{}
	got, ok := g.takeDevice(context.Background(), next)
	if !ok {
		t.Fatalf("the next run's ticket: %s", next.NoReplies)
	}
	want := fmt.Sprintf("npu: the device may be unhealthy: pid %d (sleep 60) could not be ended when ticket 1 of ", stuck.Process.Pid)
	if len(next.Hold.Unhealthy) != 1 || !strings.HasPrefix(next.Hold.Unhealthy[0], want) {
		t.Errorf("the next run's hold.unhealthy = %q, want %q...", next.Hold.Unhealthy, want)
	}
	got.Release()

	// A stop with nothing left marks nothing.
	other := t.TempDir()
	h = &deviceHold{dir: other}
	if tk, err = h.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	g.releaseDevice(tk, &report.Result{}, res.Run.Started)
	st, err = (&hold.Device{Dir: other, Name: "npu"}).Status()
	if err != nil || len(st.Unhealthy) != 0 || strings.Contains(log.String(), "unhealthy") {
		t.Errorf("a stop with no survivors: status %+v (%v), log %q; want no marker", st, err, log.String())
	}
	g.Hold = h
	clean := &report.Result{}
	if got, ok := g.takeDevice(context.Background(), clean); !ok || clean.Hold.Unhealthy != nil {
		t.Errorf("a run on a device with no marker: hold.unhealthy %q (%v), want none", clean.Hold.Unhealthy, ok)
	} else {
		got.Release()
	}
}
