package gate

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// Each reply's file holds what report.ReplyBytes makes of it, on disk when
// its line is printed; the lines come in the order they were said, and
// close returns once all are.
func TestReplyFilesWriteThenPrint(t *testing.T) {
	dir := t.TempDir()
	var printed []string
	f := startReplyFiles(openRoot(t, dir), func(line string) {
		if name, ok := strings.CutPrefix(line, "file "); ok {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				line += " (not on disk)"
			}
		}
		printed = append(printed, line)
	})
	replies := []measure.Reply{{N: 1, Warmup: true, Content: "warm"}, {N: 1, Content: "one"}, {N: 2, Content: "two", Error: "HTTP 500: no"}}
	f.say("before")
	for i := range replies {
		f.write(&replies[i], "file "+report.ReplyFile(&replies[i]), "after "+report.ReplyFile(&replies[i]))
	}
	f.say("last")
	f.close()
	want := []string{"before", "file warmup_1.json", "after warmup_1.json", "file reply_1.json", "after reply_1.json", "file reply_2.json", "after reply_2.json", "last"}
	if diff := cmp.Diff(want, printed); diff != "" {
		t.Errorf("printed (-want +got):\n%s", diff)
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

// close returns only once the last write has ended, however slow the disk.
func TestReplyFilesCloseWaitsForTheWrites(t *testing.T) {
	release := make(chan struct{})
	var done atomic.Int32
	f := startReplyFiles(openRoot(t, t.TempDir()), func(string) {})
	f.writeFile = func(*os.Root, string, []byte) error {
		<-release
		done.Add(1)
		return nil
	}
	f.write(&measure.Reply{N: 1})
	f.write(&measure.Reply{N: 2})
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	f.close()
	if n := done.Load(); n != 2 {
		t.Fatalf("close() returned with %d of 2 writes done", n)
	}
}

// A file that cannot be written is said in its turn, before the reply's
// line; a reply that cannot be made a file is said so, and written not at
// all.
func TestReplyFilesFailures(t *testing.T) {
	dir := t.TempDir()
	var printed []string
	f := startReplyFiles(openRoot(t, dir), func(line string) { printed = append(printed, line) })
	f.write(&measure.Reply{N: 2, EndMS: math.NaN()}, "reply 2")
	f.close()
	if len(printed) != 2 || !strings.HasPrefix(printed[0], "error: writing reply_2.json: json: unsupported value: NaN") || printed[1] != "reply 2" {
		t.Errorf("printed for a reply JSON cannot hold: %q, want its error, then its line", printed)
	}
	if _, err := os.Stat(filepath.Join(dir, "reply_2.json")); err == nil {
		t.Error("reply_2.json written")
	}

	printed = nil
	f = startReplyFiles(openRoot(t, dir), func(line string) { printed = append(printed, line) })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	f.write(&measure.Reply{N: 1}, "reply 1")
	f.say("next")
	f.close()
	if len(printed) != 3 || !strings.HasPrefix(printed[0], "error: writing reply_1.json: ") || printed[1] != "reply 1" || printed[2] != "next" {
		t.Errorf("printed with the out directory gone: %q, want reply_1.json's error, its line, the next", printed)
	}
}

// A "reply N:" or "warm-up N:" line on the console means that reply's file
// is on disk: a gate killed the moment after it printed the line does not
// lack the file the line named.
func TestReplyLineMeansFileOnDisk(t *testing.T) {
	p := plan(t, "--rate", "1000", "--first-token-ms", "0")
	line := regexp.MustCompile(`^(reply|warm-up) (\d+): `)
	var missing, seen []string
	log := &lineWatcher{on: func(s string) {
		m := line.FindStringSubmatch(s)
		if m == nil {
			return
		}
		name := map[string]string{"reply": "reply_", "warm-up": "warmup_"}[m[1]] + m[2] + ".json"
		seen = append(seen, name)
		if _, err := os.Stat(filepath.Join(p.Out, name)); err != nil {
			missing = append(missing, name)
		}
	}}
	if _, err := (&Gate{Plan: p, Log: log}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 || len(seen) != 4 {
		t.Errorf("lines for %q; of them, %q before their files were on disk; want 4 lines, each after its file", seen, missing)
	}
}

// A reply file that cannot be written is said among the replies, before
// the serve's stop is, as each reply's own line is.
func TestWriteErrorSaidBeforeTheStop(t *testing.T) {
	p := plan(t, "--rate", "1000", "--first-token-ms", "0")
	var lines []string
	log := &lineWatcher{on: func(s string) {
		lines = append(lines, strings.TrimSuffix(s, "\n"))
		if strings.HasPrefix(s, "warm-up 1:") {
			// The out directory gone mid-run.
			for os.RemoveAll(p.Out) != nil {
			}
		}
	}}
	if _, err := (&Gate{Plan: p, Log: log}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	at := func(prefix string) int {
		return slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
	}
	stop := at("serve: stop took")
	for _, n := range []string{"1", "2", "3"} {
		e, r := at("error: writing reply_"+n+".json"), at("reply "+n+":")
		if e < 0 || r < 0 || e > r || r > stop {
			t.Errorf("error: writing reply_%s.json at line %d, its reply's at %d, the stop's at %d; want them in that order:\n%s", n, e, r, stop, strings.Join(lines, "\n"))
		}
	}
}

// The first request waits for what the gate prepares while the serve loads
// (a collection among it), however soon the serve is ready.
func TestFirstRequestAfterPrepare(t *testing.T) {
	var done time.Time
	prepareAhead = func() {
		time.Sleep(300 * time.Millisecond)
		done = time.Now()
	}
	t.Cleanup(func() { prepareAhead = prepare })
	p := plan(t, "--rate", "1000", "--first-token-ms", "0")
	res, err := (&Gate{Plan: p}).Run(context.Background())
	if err != nil || len(res.Warmups) == 0 {
		t.Fatalf("Run() = %v, %v; want a warm-up", res, err)
	}
	if first := res.Warmups[0].T0; done.IsZero() || first.Before(done) {
		t.Errorf("first request at %v, the preparation done at %v; want it after", first, done)
	}
}
