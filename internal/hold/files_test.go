package hold

import (
	"context"
	"os"
	"strings"
	"testing"
)

// A relative lock directory is refused wherever it reaches the package: a
// queue of its own in each working directory would let two runs hold the
// device at once.
func TestRelativeLockDirRefused(t *testing.T) {
	t.Chdir(tempDir(t))
	for _, dir := range []string{"locks", "./locks", ".", "../x"} {
		d := &Device{Dir: dir, Name: "npu"}
		if err := d.CheckDir(); err == nil || !strings.Contains(err.Error(), "relative") {
			t.Errorf("CheckDir with %q: %v, want refused as relative", dir, err)
		}
		if tk, err := d.Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), "relative") {
			if tk != nil {
				tk.Release()
			}
			t.Errorf("Acquire with %q: %v, want refused as relative", dir, err)
		}
		if _, err := d.Status(); err == nil || !strings.Contains(err.Error(), "relative") {
			t.Errorf("Status with %q: %v, want refused as relative", dir, err)
		}
	}
	if _, err := os.Stat("locks"); err == nil {
		t.Errorf("a relative lock directory was made")
	}
	if err := CheckDirPath("NPU_HOLD_DIR", DefaultDir()); err != nil {
		t.Errorf("CheckDirPath of an absolute path: %v", err)
	}
}
