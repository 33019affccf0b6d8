package history

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// childEnv names the zip a child extracts and reads back, as Source.Result
// does, N times (a fleet's jobs), printing what it left on disk and its
// peak resident memory.
const childEnv = "HISTORY_EXTRACT_CHILD"

// TestHelperExtract is the child of BenchmarkExtract; it does nothing in a
// test run.
func TestHelperExtract(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("the child of BenchmarkExtract")
	}
	file, n, _ := strings.Cut(spec, ":")
	times, _ := strconv.Atoi(n)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var peakDisk int64
	refused := ""
	for i := range times {
		dir := filepath.Join(wintest.TempDir(t), strconv.Itoa(i))
		os.Mkdir(dir, 0o755)
		err := Extract(b, dir)
		var disk int64
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if d != nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					disk += fi.Size()
				}
			}
			return nil
		})
		peakDisk = max(peakDisk, disk)
		if err == nil {
			_, err = report.Read(dir)
		}
		if err != nil {
			refused = err.Error()
		}
		os.RemoveAll(dir)
	}
	// VmHWM, not getrusage's maxrss: that one keeps, across the exec, the
	// high water of the parent whose memory the child shared until then.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var hwm int64
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &hwm)
		}
	}
	fmt.Printf("disk=%d rss=%d refused=%q\n", peakDisk, hwm*1024, refused)
}

// BenchmarkExtract measures an extraction's peak disk (the bytes a
// baseline's directory holds once extracted; a refusal comes before any
// write) and the peak resident memory of a process that extracts and reads
// back: a 2 MB zip of 120 replies of 16 MiB each (1.9 GB inflated), a 1 MB
// zip of 64 (1 GiB), one of 2 (the most the bounds let through), the same
// 2 whose arrivals are empty objects (the JSON that inflates most when
// read), 2 with just under the 1,000,000 objects the bounds let through, 9,999 small replies (the most entries the bounds let through),
// and a normal 6-job baseline (6 artifacts of a run of 5
// replies of 128 tokens, read one after another as report does). Each case
// runs in a child process, so its peak is its own.
//
//	go test -run '^$' -bench Extract -benchtime 1x ./internal/history
func BenchmarkExtract(b *testing.B) {
	dir := wintest.TempDir(b)
	cases := []struct {
		name  string
		zip   []byte
		times int
	}{
		{"bomb-120-replies", bomb(b, 120, 16<<20-64), 1},
		{"bomb-64-replies", bomb(b, 64, 16<<20-64), 1},
		{"at-the-bounds-2-replies", bomb(b, 2, 16<<20-4096), 1},
		{"empty-arrivals-2-replies", arrivals(b, 2, 16<<20-4096), 1},
		{"empty-arrivals-at-the-object-bound", arrivals(b, 2, 3*499_000), 1},
		{"tiny-replies-9999", bomb(b, 9999, 3200), 1},
		{"normal-6-jobs", normal(b), 6},
		{"idle", normal(b), 0},
	}
	for _, c := range cases {
		file := filepath.Join(dir, c.name+".zip")
		if err := os.WriteFile(file, c.zip, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			var disk, rss float64
			var refused string
			for range b.N {
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperExtract$", "-test.count=1")
				cmd.Env = append(os.Environ(), childEnv+"="+file+":"+strconv.Itoa(c.times))
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("child: %v\n%s", err, out)
				}
				var d, r int64
				line := string(out)
				i := strings.Index(line, "disk=")
				if i < 0 {
					b.Fatalf("child said %q", out)
				}
				fmt.Sscanf(line[i:], "disk=%d rss=%d refused=%q", &d, &r, &refused)
				disk, rss = max(disk, float64(d)), max(rss, float64(r))
			}
			b.ReportMetric(float64(len(c.zip))/1e6, "zip-MB")
			b.ReportMetric(disk/1e6, "disk-MB")
			b.ReportMetric(rss/1e6, "peak-RSS-MB")
			if refused != "" {
				b.Logf("refused: %s", refused)
			}
		})
	}
}

// bomb is a zip of a result.json and n reply files of size bytes, one
// repeated letter in a reply's content: valid replies.
func bomb(b *testing.B, n int, size int64) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, flate.BestCompression) })
	add := func(name string, body io.Reader) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(w, body); err != nil {
			b.Fatal(err)
		}
	}
	add("result.json", strings.NewReader(result("Qwen3-0.6B", check)))
	for i := 1; i <= n; i++ {
		head := fmt.Sprintf(`{"n": %d, "content": "`, i)
		add(fmt.Sprintf("reply_%d.json", i), io.MultiReader(strings.NewReader(head), io.LimitReader(repeat('a'), size-int64(len(head))-2), strings.NewReader(`"}`)))
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// arrivals is a zip of a result.json and n reply files of about size bytes
// each, their arrivals empty objects: the JSON that inflates most when read.
func arrivals(b *testing.B, n int, size int64) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, body []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			b.Fatal(err)
		}
		w.Write(body)
	}
	add("result.json", []byte(result("Qwen3-0.6B", check)))
	for i := 1; i <= n; i++ {
		head := fmt.Sprintf(`{"n": %d, "first_ms": 1, "last_ms": 2, "completion_tokens": 2, "arrivals": [{}`, i)
		body := head + strings.Repeat(",{}", int(size-int64(len(head))-2)/3) + "]}"
		add(fmt.Sprintf("reply_%d.json", i), []byte(body))
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// normal is a job's artifact as the gate uploads it: serve.log, summary.md,
// result.json, a warm-up and 5 replies of 128 tokens, each token its own
// arrival.
func normal(b *testing.B) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, body []byte) {
		w, err := zw.Create(name)
		if err != nil {
			b.Fatal(err)
		}
		w.Write(body)
	}
	reply := func(n int, warm bool) []byte {
		type arrival struct {
			MS     float64 `json:"ms"`
			Chunks int     `json:"chunks"`
		}
		var arr []arrival
		for i := range 128 {
			arr = append(arr, arrival{MS: 250 + 11.9*float64(i), Chunks: 1})
		}
		j, _ := json.Marshal(map[string]any{"n": n, "warmup": warm, "prompt": "Name the capital of France, then explain why.",
			"first_ms": 250, "last_ms": 250 + 11.9*127, "end_ms": 1770, "arrivals": arr, "chunks": 128,
			"content": strings.Repeat("Paris is the capital. ", 28), "completion_tokens": 128, "finish_reason": "length"})
		return j
	}
	add("serve.log", bytes.Repeat([]byte("llama: decode on the private route dx, 16-row kernel, slot 0 n_past 412\n"), 3000))
	add("summary.md", bytes.Repeat([]byte("| 1 | Name the capital | 250 ms | 84.4 | 128 | Paris is |\n"), 20))
	add("result.json", []byte(result("Qwen3-0.6B", check)))
	add("warmup_1.json", reply(1, true))
	for i := 1; i <= 5; i++ {
		add(fmt.Sprintf("reply_%d.json", i), reply(i, false))
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
