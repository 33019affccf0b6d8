package logscan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// A log created in a directory opened once: never through a symlink, the
// ring beside it made and removed there, the head and tail kept.
func TestCreateBoundedIn(t *testing.T) {
	d := wintest.TempDir(t)
	victim := filepath.Join(wintest.TempDir(t), "private")
	os.WriteFile(victim, []byte("mine\n"), 0o600)
	dir, err := os.OpenRoot(d)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	t.Run("over a symlink", func(t *testing.T) {
		wintest.Symlink(t, victim, filepath.Join(d, "planted.log"))
		if _, err := CreateBoundedIn(dir, "planted.log", MinLimit); err == nil {
			t.Errorf("CreateBoundedIn over a symlink: no error")
		}
		if b, _ := os.ReadFile(victim); string(b) != "mine\n" {
			t.Errorf("the symlink's target was written: %q", b)
		}
	})
	b, err := CreateBoundedIn(dir, "serve.log", MinLimit)
	if err != nil {
		t.Fatal(err)
	}
	// Past the head, into the ring, and past the ring.
	for i := range 200 {
		b.Write([]byte(strings.Repeat("x", 60) + " line " + string(rune('a'+i%26)) + "\n"))
	}
	cut, err := b.Close()
	if err != nil || cut.Dropped == 0 {
		t.Fatalf("Close = %+v, %v; want some cut", cut, err)
	}
	got, _ := os.ReadFile(filepath.Join(d, "serve.log"))
	if !strings.Contains(string(got), "bytes cut here") || !strings.HasSuffix(string(got), " line "+string(rune('a'+199%26))+"\n") {
		t.Errorf("serve.log lacks the marker or its last line:\n%s", got)
	}
	wintest.SkipOnWine(t, wintest.NoRootRemove)
	var left []string
	names, _ := os.ReadDir(d)
	for _, e := range names {
		if e.Name() != "planted.log" {
			left = append(left, e.Name())
		}
	}
	if len(left) != 1 || left[0] != "serve.log" {
		t.Errorf("left in the directory: %v, want serve.log (and planted.log) alone (the ring removed)", left)
	}
}
