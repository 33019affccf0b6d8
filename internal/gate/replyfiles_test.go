package gate

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// Each reply's file holds what report.ReplyBytes makes of it, once wait has
// returned; nothing is said when all went well.
func TestReplyFilesWritten(t *testing.T) {
	dir := t.TempDir()
	f := &replyFiles{dir: openRoot(t, dir)}
	replies := []measure.Reply{{N: 1, Warmup: true, Content: "warm"}, {N: 1, Content: "one"}, {N: 2, Content: "two", Error: "HTTP 500: no"}}
	for i := range replies {
		f.write(&replies[i])
	}
	if errs := f.wait(); len(errs) != 0 {
		t.Fatalf("wait() = %q, want no error", errs)
	}
	for i := range replies {
		name := report.ReplyFile(&replies[i])
		want, err := report.ReplyBytes(name, &replies[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != len(replies) {
		t.Errorf("%d entries in the out directory, want %d (no temporary file left)", len(ents), len(replies))
	}
}

// wait returns only once the last write has ended, however slow the disk.
func TestReplyFilesWaitForTheWrites(t *testing.T) {
	release := make(chan struct{})
	var done atomic.Int32
	f := &replyFiles{dir: openRoot(t, t.TempDir()), writeFile: func(*os.Root, string, []byte) error {
		<-release
		done.Add(1)
		return nil
	}}
	f.write(&measure.Reply{N: 1})
	f.write(&measure.Reply{N: 2})
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	f.wait()
	if n := done.Load(); n != 2 {
		t.Fatalf("wait() returned with %d of 2 writes done", n)
	}
}

// A file that cannot be written is said, once, by whoever asks next; a
// reply that cannot be made a file is said at once, and written not at all.
func TestReplyFilesFailures(t *testing.T) {
	dir := t.TempDir()
	f := &replyFiles{dir: openRoot(t, dir)}
	f.write(&measure.Reply{N: 2, EndMS: math.NaN()})
	if errs := f.failures(); len(errs) != 1 || !strings.HasPrefix(errs[0], "error: writing reply_2.json: json: unsupported value: NaN") {
		t.Errorf("failures() after a reply JSON cannot hold = %q, want it said at once", errs)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	f.write(&measure.Reply{N: 1})
	errs := f.wait()
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "error: writing reply_1.json: ") {
		t.Errorf("wait() with the out directory gone = %q, want reply_1.json's error", errs)
	}
	if errs := f.failures(); len(errs) != 0 {
		t.Errorf("failures() after wait() = %q, want them said once", errs)
	}
}
