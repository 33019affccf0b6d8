package logscan

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

func matcher(t testing.TB) *judge.RouteMatcher {
	m, err := judge.NewRouteMatcher(judge.DefaultFastRoute, judge.DefaultSlowRoute)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestScan(t *testing.T) {
	var b strings.Builder
	b.WriteString("loading\r\n")
	b.WriteString("ready on the private route dx\n")
	b.WriteString(strings.Repeat("z", judge.MaxLine+10) + " per-op forward (past the cut)\n")
	for i := range 50 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	b.WriteString("no final newline")
	res, err := Scan(strings.NewReader(b.String()), matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Route.Fast == nil || res.Route.Fast.Line != 2 || res.Route.Fast.Text != "ready on the private route dx" {
		t.Errorf("Route.Fast = %+v, want line 2", res.Route.Fast)
	}
	if res.Route.Slow != nil {
		t.Errorf("Route.Slow = %+v, want nil: the slow words stand past the cut of an over-long line", res.Route.Slow)
	}
	if res.Route.Lines != 54 {
		t.Errorf("Route.Lines = %d, want 54", res.Route.Lines)
	}
	var want []string
	for i := 11; i < 50; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	want = append(want, "no final newline")
	if diff := cmp.Diff(want, res.Tail); diff != "" {
		t.Errorf("Tail (-want +got):\n%s", diff)
	}
	if res.Bytes != int64(b.Len()) {
		t.Errorf("Bytes = %d, want %d", res.Bytes, b.Len())
	}
}

func TestScanShortLogAndLongTailLine(t *testing.T) {
	long := strings.Repeat("x", TailLineMax+5)
	res, err := Scan(strings.NewReader("a per-op forward b\n"+long+"\n"), matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a per-op forward b", long[:TailLineMax]}
	if diff := cmp.Diff(want, res.Tail); diff != "" {
		t.Errorf("Tail (-want +got):\n%s", diff)
	}
	if res.Route.Slow == nil || res.Route.Slow.Line != 1 {
		t.Errorf("Route.Slow = %+v, want line 1", res.Route.Slow)
	}
}

func TestScanFileMissing(t *testing.T) {
	if _, err := ScanFile(t.TempDir()+"/nope.log", matcher(t)); err == nil {
		t.Error("ScanFile of a missing file: no error")
	}
}

// logReader serves n bytes of serve-like log lines without holding them.
type logReader struct {
	left int64
	line []byte
	off  int
}

func (r *logReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:], r.line[r.off:])
		if int64(c) > r.left {
			c = int(r.left)
		}
		n += c
		r.left -= int64(c)
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

// BenchmarkScan reads a 256 MiB log; B/op shows the memory stays bounded
// whatever the log's size.
func BenchmarkScan(b *testing.B) {
	const size = 256 << 20
	line := []byte("slot update_slots: id  0 | task 12 | prompt processing progress, n_past = 512, n_tokens = 512, progress = 0.5\n")
	b.SetBytes(size)
	for b.Loop() {
		if _, err := Scan(&logReader{left: size, line: line}, matcher(b)); err != nil {
			b.Fatal(err)
		}
	}
}
