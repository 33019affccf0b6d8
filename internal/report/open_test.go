package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// A run's files come from an artifact, untrusted: Read refuses a FIFO (which
// would block its open), a link, and a file past MaxFile before reading it
// (a sparse file stands for a large one).
func TestReadRefusesUnsafeFiles(t *testing.T) {
	const result = `{"schema": "npu-serve-smoke/v1", "verdict": "pass"}`
	const reply = `{"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": 128}`
	fifo := mkfifo
	sized := func(n int64) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	link := func(t *testing.T, path string) {
		target := filepath.Join(wintest.TempDir(t), "elsewhere.json")
		os.WriteFile(target, []byte(reply), 0o644)
		wintest.Symlink(t, target, path)
	}
	for _, tc := range []struct {
		name, file string
		make       func(*testing.T, string)
		want       string
	}{
		{name: "a FIFO result.json", file: ResultFile, make: fifo, want: "result.json is not a regular file (p"},
		{name: "a FIFO reply", file: "reply_1.json", make: fifo, want: "reply_1.json is not a regular file (p"},
		{name: "a linked reply", file: "reply_1.json", make: link, want: "reply_1.json is a symbolic link"},
		{name: "a 1.5 GB reply", file: "reply_1.json", make: sized(1500 << 20), want: "reply_1.json is 1572864000 bytes, more than the 16777216 a run's file may be"},
		{name: "a reply one byte past the bound", file: "reply_1.json", make: sized(MaxFile + 1), want: "reply_1.json is 16777217 bytes"},
		{name: "a reply at the bound is read", file: "reply_1.json", make: sized(MaxFile), want: "reply_1.json: not a reply file"},
		{name: "a 1 GB result.json", file: ResultFile, make: sized(1 << 30), want: "result.json is 1073741824 bytes, more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := wintest.TempDir(t)
			os.WriteFile(filepath.Join(dir, ResultFile), []byte(result), 0o644)
			os.Remove(filepath.Join(dir, tc.file))
			tc.make(t, filepath.Join(dir, tc.file))
			if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read(dir with %s) = %v, want %q", tc.name, err, tc.want)
			}
		})
	}
}

// ReadFile reads the result file a user names, through a link too.
func TestReadFileFollowsALink(t *testing.T) {
	dir := wintest.TempDir(t)
	os.WriteFile(filepath.Join(dir, ResultFile), []byte(`{"schema": "npu-serve-smoke/v1"}`), 0o644)
	wintest.Symlink(t, filepath.Join(dir, ResultFile), filepath.Join(dir, "baseline.json"))
	if _, err := ReadFile(filepath.Join(dir, "baseline.json")); err != nil {
		t.Errorf("ReadFile(a link to a result file) = %v, want it read", err)
	}
}
