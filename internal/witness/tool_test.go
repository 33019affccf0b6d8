//go:build !windows

package witness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// fakeTool puts an executable named name on PATH, running script.
func fakeTool(t *testing.T, name, script string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// alive is the processes whose command line holds text.
func alive(text string) []string {
	var out []string
	cls, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cls {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), text) {
			out = append(out, f)
		}
	}
	return out
}

// TestToolBounded runs a real vendor tool from PATH that misbehaves: it
// never answers, with a child of its own holding its output open; it
// prints without end; it exits leaving a child that holds its output.
// Each is a reason, in time, with nothing of the tool left running.
func TestToolBounded(t *testing.T) {
	tests := []struct {
		name, script, mark, why string
		wait                    time.Duration
	}{
		{"hangs", "echo '| NPU Chip | Process id | Process name | Process memory(MB) |'\nsleep 3601.25\necho never\n",
			"sleep 3601.25", "did not answer in time (at most 5s): killed", 300 * time.Millisecond},
		{"endless", "while :; do echo '| 0 0 | 1 | python | 1 |'; done\n",
			"", "printed more than 1 MiB", time.Minute},
		{"leaves a child", "sleep 3602.5 &\necho '| NPU Chip | Process id | Process name | Process memory(MB) |'\n",
			"sleep 3602.5", "left a process of its own running", time.Minute},
		// A helper that ended, unreaped, comes back to the gate (a child
		// subreaper) as a zombie: nothing left running.
		{"leaves a helper that ended", "true &\nsleep 0.2\necho '| NPU Chip | Process id | Process name | Process memory(MB) |'\n",
			"", "lists none of the serve's processes (0 listed)", time.Minute},
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeTool(t, "npu-smi", tc.script)
			r := &Reader{Devices: []string{"/dev/davinci[0-9]*"}}
			ctx, cancel := context.WithTimeout(context.Background(), tc.wait)
			defer cancel()
			tool := r.npuSMI(ctx, []int{os.Getpid()})
			if !strings.Contains(tool.Why, tc.why) || tool.Listed {
				t.Errorf("npu-smi: %+v; want not read: %q", tool, tc.why)
			}
			if tc.mark != "" {
				if left := alive(tc.mark); len(left) > 0 {
					t.Errorf("left running: %v", left)
				}
			}
		})
	}
}

// The vendors' tools run from Tools, as found before the serve started,
// with its allow-listed environment: none of the step's secrets.
func TestToolEnvironment(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	if err := os.WriteFile(filepath.Join(dir, "npu-smi"), []byte("#!/bin/sh\nenv >"+seen+"\necho '| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := vendortool.Find([]string{"PATH=" + dir + ":/usr/bin:/bin", "ASCEND_RT_VISIBLE_DEVICES=2",
		"GITHUB_TOKEN=ghs_secret", "INPUT_GITHUB-TOKEN=ghs_secret", "ACTIONS_RUNTIME_TOKEN=secret", "GITHUB_OUTPUT=/o", "GITHUB_STEP_SUMMARY=/m"})
	// The process's own PATH has no npu-smi: the one found is run.
	t.Setenv("PATH", "/usr/bin:/bin")
	r := &Reader{Devices: []string{"/dev/davinci[0-9]*"}, Tools: tools}
	tool := r.npuSMI(context.Background(), []int{os.Getpid()})
	if !strings.Contains(tool.Why, "lists none of the serve's processes") {
		t.Errorf("npu-smi: %+v; want it read", tool)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"GITHUB_TOKEN=", "INPUT_GITHUB-TOKEN=", "ACTIONS_RUNTIME_TOKEN=", "GITHUB_OUTPUT=", "GITHUB_STEP_SUMMARY="} {
		if strings.Contains(string(b), secret) {
			t.Errorf("npu-smi ran with %s in its environment:\n%s", secret, b)
		}
	}
	if !strings.Contains(string(b), "ASCEND_RT_VISIBLE_DEVICES=2\n") {
		t.Errorf("npu-smi ran without the device runtime's variable:\n%s", b)
	}
}
