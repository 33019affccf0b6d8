package logscan

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// source is n bytes of numbered lines, so any cut shows where it fell.
func source(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %07d of the serve's log\n", i)
	}
	return b.Bytes()[:n]
}

var marker = regexp.MustCompile(`\n\[npu-serve-smoke: (\d+) bytes cut here; [^\n]*\]\n`)

func TestBounded(t *testing.T) {
	const limit = 64 << 10
	for _, size := range []int{0, 100, limit / 2, limit - markerRoom, limit, 3*limit + 7, 40 * limit} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			src := source(size)
			path := filepath.Join(wintest.TempDir(t), "serve.log")
			b, err := CreateBounded(path, limit)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(size), 1))
			for p := src; len(p) > 0; {
				k := min(len(p), 1+rng.IntN(3*limit/2))
				b.Write(p[:k])
				p = p[k:]
			}
			cut, err := b.Close()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if cut.Written != int64(size) {
				t.Errorf("Close().Written = %d, want %d", cut.Written, size)
			}
			if len(got) > limit {
				t.Errorf("serve.log is %d bytes, over the limit %d", len(got), limit)
			}
			m := marker.FindSubmatchIndex(got)
			if cut.Dropped == 0 {
				if !bytes.Equal(got, src) || m != nil {
					t.Errorf("a log within the limit: serve.log differs from what was written (%d bytes, want %d)", len(got), len(src))
				}
				return
			}
			if m == nil {
				t.Fatalf("serve.log has no marker where it was cut")
			}
			head, tail := got[:m[0]], got[m[1]:]
			if string(got[m[2]:m[3]]) != fmt.Sprint(cut.Dropped) {
				t.Errorf("marker says %s bytes cut, Close says %d", got[m[2]:m[3]], cut.Dropped)
			}
			if !bytes.Equal(head, src[:len(head)]) || !bytes.Equal(tail, src[len(src)-len(tail):]) {
				t.Errorf("serve.log's head or tail is not the log's own")
			}
			if int64(len(head)+len(tail))+cut.Dropped != int64(size) {
				t.Errorf("head %d + tail %d + dropped %d != %d written", len(head), len(tail), cut.Dropped, size)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".serve.log.tail-*")); len(left) > 0 {
				t.Errorf("the tail's ring file was left behind: %v", left)
			}
		})
	}
	if _, err := CreateBounded(filepath.Join(wintest.TempDir(t), "x"), 100); err == nil {
		t.Error("CreateBounded with a limit under MinLimit: no error")
	}
}

// TestCapture runs a real process whose output is 1 MiB with the slow line
// in the middle: the file keeps 64 KiB, the scan saw the line.
func TestCapture(t *testing.T) {
	needSh(t)
	dir := wintest.TempDir(t)
	script := filepath.Join(dir, "serve.sh")
	os.WriteFile(script, []byte(`i=0; while [ $i -lt 20000 ]; do echo "progress line $i of a chatty serve"; i=$((i+1)); if [ $i = 10000 ]; then printf '\033[31mno kernel: per-op forward\033[0m\n' >&2; fi; done`), 0o755)
	c, stdout, stderr, err := NewCapture(filepath.Join(dir, "serve.log"), 64<<10, matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", script)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	stderr.Close()
	cmd.Wait()
	got, err := c.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// stderr is read beside stdout: its line is among stdout's, where the
	// two readers put it.
	if got.Route.Slow == nil || got.Route.Slow.Line < 1 || got.Route.Slow.Line > 20001 || got.Route.Slow.Text != "no kernel: per-op forward" {
		t.Errorf("Route.Slow = %+v, want the stderr line without its colour", got.Route.Slow)
	}
	fi, _ := os.Stat(filepath.Join(dir, "serve.log"))
	if fi.Size() > 64<<10 || got.Dropped == 0 || got.Written != got.Bytes {
		t.Errorf("serve.log %d bytes, Dropped %d, Written %d, scanned %d: want at most 64 KiB kept, the rest dropped, all scanned", fi.Size(), got.Dropped, got.Written, got.Bytes)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "serve.log")); strings.Contains(string(b), "per-op forward") {
		t.Errorf("serve.log still holds the middle of the log")
	}
}

// TestCaptureEscaped: a process that keeps the pipe open past the stop does
// not hold the capture: Wait returns within its bound with what was written.
func TestCaptureEscaped(t *testing.T) {
	needSh(t)
	c, stdout, stderr, err := NewCapture(filepath.Join(wintest.TempDir(t), "serve.log"), 64<<10, matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := wintest.TempDir(t)
	cmd := exec.Command("/bin/sh", "-c", "echo on the private route dx; touch "+dir+"/said; exec sleep 30")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	stdout.Close()
	stderr.Close()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(dir + "/said"); err == nil {
			break
		}
	}
	got, err := c.Wait(100 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got.Route.Fast == nil {
		t.Errorf("Route.Fast = nil, want the line written before Wait gave up")
	}
}

// TestCaptureStreams: a line one stream writes in pieces is not cut by a
// line of the other; each line of each stream reaches the file whole.
func TestCaptureStreams(t *testing.T) {
	dir := wintest.TempDir(t)
	c, stdout, stderr, err := NewCapture(filepath.Join(dir, "serve.log"), 64<<10, matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	// A serve writing in pieces, the two streams alternating; the pieces
	// of each are written in order, as the serve would.
	stdout.WriteString("fell back: per-")
	stderr.WriteString("INFO sim ready on the private route dx\nINFO half ")
	stdout.WriteString("op forward\nnext ")
	stderr.WriteString("a line\n")
	stdout.WriteString("line\n")
	stdout.Close()
	stderr.Close()
	got, err := c.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(lines)
	want := []string{"INFO half a line", "INFO sim ready on the private route dx", "fell back: per-op forward", "next line"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("serve.log lines, sorted (-want +got):\n%s", diff)
	}
	if got.Route.Slow == nil || got.Route.Slow.Text != "fell back: per-op forward" {
		t.Errorf("Route.Slow = %+v, want the slow line whole", got.Route.Slow)
	}
}

// TestCaptureLongPart: a line longer than MaxPart is written in part; the
// other stream's lines wait for its end, and a line left open at the end
// is ended before the other stream's last line.
func TestCaptureLongPart(t *testing.T) {
	dir := wintest.TempDir(t)
	c, stdout, stderr, err := NewCapture(filepath.Join(dir, "serve.log"), 4<<20, matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", MaxPart+10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		stdout.WriteString(long)
		time.Sleep(50 * time.Millisecond)
		stdout.WriteString(" per-op forward\nopen")
		stdout.Close()
	}()
	time.Sleep(20 * time.Millisecond)
	stderr.WriteString("err line\nerr open")
	stderr.Close()
	<-done
	got, err := c.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	lines := strings.Split(string(b), "\n")
	slices.Sort(lines)
	want := []string{"err line", "err open", "open", long + " per-op forward"}
	slices.Sort(want)
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("serve.log lines, sorted (-want +got):\n%s", diff)
	}
	if got.Route.Slow == nil {
		t.Errorf("Route.Slow = nil, want the end of the long line read")
	}
}
