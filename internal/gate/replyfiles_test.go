package gate

import (
	"context"
	"fmt"
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

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
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
	if got := f.close(); len(got) != 1 || !strings.HasPrefix(got[0], "reply_2.json: json: unsupported value: NaN") {
		t.Errorf("unwritten = %q, want reply_2.json's error", got)
	}
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
	if got := f.close(); len(got) != 1 || !strings.HasPrefix(got[0], "reply_1.json: ") {
		t.Errorf("unwritten with the out directory gone = %q, want reply_1.json's error", got)
	}
	if len(printed) != 3 || !strings.HasPrefix(printed[0], "error: writing reply_1.json: ") || printed[1] != "reply 1" || printed[2] != "next" {
		t.Errorf("printed with the out directory gone: %q, want reply_1.json's error, its line, the next", printed)
	}
}

// A "reply N:" or "warm-up N:" line on the console means that reply's file
// is on disk: a gate killed the moment after it printed the line does not
// lack the file the line named.
func TestReplyLineMeansFileOnDisk(t *testing.T) {
	p := plan(t, "--rate", "1000", "--first-token-ms", "0")
	// The serve's own rate: at 1000 tok/s a loaded machine can read a
	// reply in one arrival, a reply with no rate of the stream's, and the
	// sequential rule then asks more replies than the three.
	p.RateSource = judge.RateServer
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
	res, err := (&Gate{Plan: p, Log: log}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range res.Warmups {
		want = append(want, fmt.Sprintf("warmup_%d.json", i+1))
	}
	for i := range res.Replies {
		want = append(want, fmt.Sprintf("reply_%d.json", i+1))
	}
	if len(missing) > 0 || len(want) < 4 || !slices.Equal(seen, want) {
		t.Errorf("lines for %q; of them, %q before their files were on disk; want a line for each of %q (a warm-up and 3 replies at least), each after its file", seen, missing, want)
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

// A reply file that cannot be written is in result.json (unwritten) and
// in the summary, the reply in result.json all the same; a recording with
// one cannot serve as a reference, since only the files keep the tokens a
// run compares (a warm-up's file it does without), and a run given it as
// --reference refuses it.
func TestUnwrittenReplyFileRecorded(t *testing.T) {
	for _, tt := range []struct {
		name, kind, file string
		recording        string // the recording assertion: "" (none), "ok" or "FAIL"
	}{
		{"run", report.KindRun, "reply_2.json", ""},
		{"recording", report.KindReference, "reply_2.json", "FAIL"},
		{"recording, a warm-up's file", report.KindReference, "warmup_1.json", "ok"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := plan(t, "--instant", "--first-token-ms", "0")
			// Five replies: a recording answers each first-round prompt.
			p.RateSource, p.Kind, p.Replies = judge.RateServer, tt.kind, 5
			// A directory where the file goes: its write fails.
			if err := os.MkdirAll(filepath.Join(p.Out, tt.file, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			res, err := (&Gate{Plan: p}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Unwritten) != 1 || !strings.HasPrefix(res.Unwritten[0], tt.file+": ") {
				t.Fatalf("unwritten = %q, want %s's error", res.Unwritten, tt.file)
			}
			if len(res.Replies) != 5 || res.Replies[1].N != 2 || res.Replies[1].Content == "" {
				t.Errorf("%d replies, the second %d with content %q; want reply 2 among 5 with its content", len(res.Replies), res.Replies[1].N, res.Replies[1].Content)
			}
			read, err := report.ReadFile(filepath.Join(p.Out, report.ResultFile))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(res.Unwritten, read.Unwritten); diff != "" {
				t.Errorf("result.json's unwritten (-run +file):\n%s", diff)
			}
			if md := report.Markdown(res, report.MarkdownLimit); !strings.Contains(md, "Not written: "+strings.ReplaceAll(tt.file, "_", `\_`)+": ") {
				t.Errorf("the summary does not say %s was not written:\n%s", tt.file, md)
			}
			got := ""
			if i := slices.IndexFunc(res.Assertions, func(a judge.Assertion) bool { return a.Name == Recording }); i >= 0 {
				got = "FAIL"
				if a := res.Assertions[i]; a.OK {
					got = "ok"
				} else if !strings.Contains(a.Detail, "lacks reply files") || !strings.Contains(a.Detail, tt.file+": ") {
					t.Errorf("the recording assertion's detail %q does not say %s is missing", a.Detail, tt.file)
				}
			}
			if got != tt.recording || res.Pass() != (got != "FAIL") {
				t.Errorf("the recording assertion %q, verdict %s; want %q, and a pass unless it failed", got, res.Verdict, tt.recording)
			}
			if tt.kind != report.KindReference {
				return
			}
			// A run of the same settings given the directory as --reference
			// takes it or refuses it as the recording said, once the file's
			// way is clear (the disk freed, say) and the file still absent.
			if err := os.RemoveAll(filepath.Join(p.Out, tt.file)); err != nil {
				t.Fatal(err)
			}
			ref, err := config.LoadReference(p.Out)
			if err != nil {
				t.Fatal(err)
			}
			_, err = config.UseReference("--reference "+p.Out, p.Out, ref, p.ReferenceWant())
			if (err == nil) != (tt.recording == "ok") || err != nil && !strings.Contains(err.Error(), "lacks reply files") {
				t.Errorf("--reference %s (unwritten %q): %v; want it refused exactly when the recording failed, saying the files are missing", p.Out, ref.Unwritten, err)
			}
		})
	}
}
