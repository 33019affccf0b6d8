//go:build windows

package energy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tempDir is a directory removed with os.Remove at the test's end:
// t.TempDir's os.RemoveAll is refused by Wine ("Invalid function").
func tempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "energy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		names, _ := os.ReadDir(dir)
		for _, n := range names {
			os.Remove(filepath.Join(dir, n.Name()))
		}
		os.Remove(dir)
	})
	return dir
}

func TestReadNumberWindows(t *testing.T) {
	dir := tempDir(t)
	p := filepath.Join(dir, "energy_uj")
	if err := os.WriteFile(p, []byte("12.5\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := readNumberOf(p, 0); err != nil || v != 12.5 {
		t.Errorf("readNumberOf = %v, %v; want 12.5", v, err)
	}
	// The file is this account's, the serve's: refused where the serve
	// is known.
	if _, err := readNumberOf(p, ^uint32(0)); err == nil || !strings.Contains(err.Error(), "the serve's account (the gate's own), which could set it") {
		t.Errorf("a file of the serve's account: %v", err)
	}
	if _, err := readNumberOf(dir, 0); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := readNumberOf(`\\.\pipe\npu-serve-smoke-none`, 0); err == nil {
		t.Error("a pipe that is not there was read")
	}
	os.WriteFile(p, []byte(strings.Repeat("1", maxFile+1)), 0o644)
	if _, err := readNumberOf(p, 0); err == nil || !strings.Contains(err.Error(), "holds more than a number") {
		t.Errorf("a long file: %v", err)
	}
}

func TestLocalAbs(t *testing.T) {
	for p, want := range map[string]bool{`C:\sensors\e`: true, `c:/sensors/e`: true, `\\srv\share\e`: false, `\\?\C:\e`: false, `/sensors/e`: false, `e`: false, `C:e`: false} {
		if got := localAbs(p); got != want {
			t.Errorf("localAbs(%q) = %v, want %v", p, got, want)
		}
	}
	if _, err := ParseSpec(`counter:\\srv\share\e:uj`); err == nil || !strings.Contains(err.Error(), "not a UNC path") {
		t.Errorf("a UNC counter: %v", err)
	}
	if s, err := ParseSpec(`power:C:\sensors\p:mw`); err != nil || s.Arg != `C:\sensors\p` || s.Scale != 1e-3 {
		t.Errorf("a local power file: %+v, %v", s, err)
	}
}

// auto on Windows tries the preset's sources, then nvml and emi, and
// says why each was passed over (under Wine: no nvidia-smi, no meter).
func TestAutoWindows(t *testing.T) {
	if got := withOSKinds([]string{"hwmon", "rapl"}); !slices.Equal(got, []string{"hwmon", "rapl", "nvml", "emi"}) {
		t.Errorf("withOSKinds = %q", got)
	}
	if got := withOSKinds([]string{"emi", "nvml"}); !slices.Equal(got, []string{"emi", "nvml"}) {
		t.Errorf("withOSKinds = %q", got)
	}
	src, passed, err := Open(Spec{Kind: Auto}, []string{"hwmon", "rapl"}, DefaultEnv(nil))
	t.Logf("auto: %v; passed over: %q", err, passed)
	if src != nil {
		src.Close()
		t.Skip("this machine has a source")
	}
	if len(passed) != 4 || !strings.HasPrefix(passed[2], "nvml: ") || !strings.HasPrefix(passed[3], "emi: ") {
		t.Errorf("passed over %q; want hwmon, rapl, nvml and emi, each with why", passed)
	}
}
