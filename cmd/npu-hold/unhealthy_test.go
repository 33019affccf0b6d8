package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
)

// status says the device may be unhealthy while a process a stop could
// not end still runs, naming its pid, its image and when; --json gives the
// marker.
func TestStatusUnhealthy(t *testing.T) {
	dir := t.TempDir()
	tk, err := (&hold.Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// This test's parent (go test): it runs while status looks.
	err = tk.NoteSurvivors([]hold.Survivor{{PID: os.Getppid(), Image: "stuck.exe"}})
	tk.Release()
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "NPU_HOLD_DIR" {
			return dir
		}
		return ""
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"status"}, getenv, nil, &out, &errOut); code != exitOK {
		t.Fatalf("status = %d: %s", code, errOut.String())
	}
	want := "npu: free\n  npu: the device may be unhealthy: pid " + strconv.Itoa(os.Getppid()) + " (stuck.exe) could not be ended when ticket 1 of "
	if !strings.HasPrefix(out.String(), want) || !strings.HasSuffix(out.String(), " UTC; if it does not go, reboot the machine\n") {
		t.Errorf("status =\n%s\nwant it to start %q and say when", out.String(), want)
	}
	out.Reset()
	if code := run([]string{"status", "--json"}, getenv, nil, &out, &errOut); code != exitOK {
		t.Fatalf("status --json = %d: %s", code, errOut.String())
	}
	var st hold.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Unhealthy) != 1 || st.Unhealthy[0].Survivors[0].PID != os.Getppid() || st.Unhealthy[0].Survivors[0].Image != "stuck.exe" || st.Unhealthy[0].When.IsZero() {
		t.Errorf("status --json = %s (%v), want the marker with its pid, image and time", out.String(), err)
	}
}
