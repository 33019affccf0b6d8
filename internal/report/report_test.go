package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

func ptr[T any](v T) *T { return &v }

func sample() *Result {
	rep := func(n int, first, last float64, content string) measure.Reply {
		return measure.Reply{N: n, Prompt: "Explain caches", FirstMS: ptr(first), LastMS: ptr(last), EndMS: last + 1,
			Chunks: 128, CompletionTokens: ptr(128), Content: content,
			Server: &measure.ServerTimings{PredictedN: 128, PredictedMS: last - first, PredictedPerSecond: 128 / (last - first) * 1000}}
	}
	r := &Result{
		Schema:  Schema,
		Limits:  judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateClient},
		Replies: []measure.Reply{rep(1, 250, 1520, "A cache holds lines."), rep(2, 277, 1777, "Caches.")},
		Warmups: []measure.Reply{{N: 1, Warmup: true}},
		Run:     RunFacts{Model: "Qwen3-0.6B", Replies: 2, Warmup: 1, MaxTokens: 128, Thinking: "off", Prompts: "built-in", Out: "out"},
		Serve:   ServeFacts{Argv: []string{"llama-server", "--port", "8080"}, Port: 8080, ReadyPath: "/health", ReadyMS: 3400, Exit: "exited with status 0", Signal: "TERM", StopMS: 120, LogBytes: 2048, LogTail: []string{"loading", "ready"}},
		Hold:    HoldFacts{Mode: "builtin", Device: "npu", WaitedMS: 1200, HeldMS: 9000},
	}
	m, _ := route.NewMatcher(route.DefaultFast, route.DefaultSlow)
	m.Line([]byte("ready on the private route dx"))
	r.Route = m.Evidence()
	r.Judged(judge.Judge(r.Input()))
	return r
}

func TestConsole(t *testing.T) {
	r := sample()
	var b bytes.Buffer
	Console(&b, r)
	want := `route        ok    the serve log names the fast route: "ready on the private route dx" (line 1)
rate         ok    median 92.3 tok/s (floor 60.0; each: 100.0, 84.7; the serve's own: 100.0, 84.7)
first-token  ok    median 264 ms (limit 600; each: 250, 277)
content      ok    2 replies, all with content
RESULT: PASS
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Console() (-want +got):\n%s", diff)
	}
	for verdict, last := range map[string]string{Fail: "RESULT: FAIL\n", Cancelled: "RESULT: FAIL (cancelled)\n"} {
		r.Verdict = verdict
		b.Reset()
		Console(&b, r)
		if !strings.HasSuffix(b.String(), last) {
			t.Errorf("Console() of a %s run ends %q, want %q", verdict, b.String()[b.Len()-20:], last)
		}
	}
}

func TestConsoleText(t *testing.T) {
	tests := map[string]string{
		"plain words":                       "plain words",
		"a\n::set-output name=x::y":         `a\n::set-output name=x::y`,
		"\x1b[2Jclear\r":                    `\x1b[2Jclear\r`,
		"tab\there":                         `tab\there`,
		"line\u2028separator":               `line\u2028separator`,
		"é and 漢字 stay":                     "é and 漢字 stay",
		string([]byte{'b', 'a', 'd', 0xff}): `bad\xff`,
	}
	for in, want := range tests {
		if got := ConsoleText(in); got != want {
			t.Errorf("ConsoleText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCell(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"plain", 10, "plain"},
		{"| a | b |", 20, "&#124; a &#124; b &#124;"},
		{"</table><script>alert(1)</script>", 100, `&lt;/table&gt;&lt;script&gt;alert\(1\)&lt;/script&gt;`},
		{"@everyone look", 20, "@\u200deveryone look"},
		{"fixes #123", 20, "fixes &#35;\u200d123"},
		{"see acme/serve#12 and GH-12, gh-7", 40, "see acme/serve&#35;\u200d12 and GH-\u200d12, gh-\u200d7"},
		{"get https://evil.example/fix", 40, "get https\u200d://evil.example/fix"},
		{"HTTP://A.B ftp://c.d xhttps://e.f", 40, "HTTP\u200d://A.B ftp\u200d://c.d xhttps\u200d://e.f"},
		{"or www.evil.example or WWW.X.Y", 40, "or www\u200d.evil.example or WWW\u200d.X.Y"},
		{"mail a@b.example", 40, "mail a@\u200db.example"},
		{"GH-x gh- 1 http:x www", 40, "GH-x gh- 1 http:x www"},
		{"bidi \u202eexe\u2066 zero\u200bwidth", 40, "bidi \uFFFDexe\uFFFD zero\uFFFDwidth"},
		{"`code` and ``` fences", 40, "&#96;code&#96; and &#96;&#96;&#96; fences"},
		{"[click](http://x)", 40, `\[click\]\(http` + "\u200d" + `://x\)`},
		{"**bold** _it_ ~~s~~ \\", 40, `\*\*bold\*\* \_it\_ \~\~s\~\~ \\`},
		{"two\nlines\r\tand tab", 40, "two lines  and tab"},
		{"\x1b[31mred", 20, "\uFFFD\\[31mred"},
		{"a & b \"q\"", 20, "a &amp; b &quot;q&quot;"},
		{"abcdef", 3, "abc…"},
		{"costs $5 or $$x^2$$ and $`y`$", 40, "costs <span>$</span>5 or <span>$</span><span>$</span>x^2<span>$</span><span>$</span> and <span>$</span>&#96;y&#96;<span>$</span>"},
		{"ééééé", 4, "éééé…"},
	}
	for _, tt := range tests {
		if got := Cell(tt.in, tt.n); got != tt.want {
			t.Errorf("Cell(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	r := sample()
	md := Markdown(r, MarkdownLimit)
	for _, want := range []string{
		"### ✅ npu serve smoke: PASS\n",
		"Median decode rate **92.3 tok/s** (no interval from 2 replies; floor 60.0), median first token **264 ms** (no interval from 2 replies; limit 600), over 2 replies.\n",
		"| route | ✅ ok | the serve log names the fast route: &quot;ready on the private route dx&quot; \\(line 1\\) |",
		"| 1 | Explain caches | 250 ms | 100.0 tok/s | 128 | 100.0 tok/s | — | A cache holds lines. |",
		"| 2 | Explain caches | 277 ms | 84.7 tok/s | 128 | 84.7 tok/s | — | Caches. |",
		"Warm-ups (1) are not judged.",
		"| model | Qwen3-0.6B |",
		"| hold | builtin on npu: waited 1.2 s, held 9.0 s |",
		"| serve ready | 3.4 s (/health, port 8080) |",
		"| serve stop | exited with status 0 (TERM) in 120 ms; 0 swept, 0 survivors |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "<details>") {
		t.Errorf("Markdown() of a pass shows the log tail")
	}

	r.Verdict = Fail
	r.Serve.LogTail = []string{"a ``` fence", "`````five", "\x1b[0m</details>"}
	md = Markdown(r, MarkdownLimit)
	if !strings.Contains(md, "### ❌ npu serve smoke: FAIL") || !strings.Contains(md, "<details><summary>serve log: the last 3 lines of 2048 bytes</summary>") {
		t.Errorf("Markdown() of a failure lacks the verdict or the log tail:\n%s", md)
	}
	if !strings.Contains(md, "``````text\na ``` fence\n`````five\n\uFFFD[0m</details>\n``````\n") {
		t.Errorf("Markdown() log tail is not fenced longer than its longest backtick run:\n%s", md)
	}

	r.Hold = HoldFacts{Mode: "none"}
	if md = Markdown(r, MarkdownLimit); !strings.Contains(md, "| hold | none (--hold none): the device was not held |") {
		t.Errorf("Markdown() does not say the device was not held:\n%s", md)
	}
}

func TestMarkdownReplyCells(t *testing.T) {
	r := sample()
	r.Replies[0].Error = "HTTP 500: boom"
	r.Replies[1].Content, r.Replies[1].Reasoning = "", "Okay, so"
	r.Replies[1].CompletionTokens, r.Replies[1].Server = nil, nil
	md := Markdown(r, MarkdownLimit)
	for _, want := range []string{"| error: HTTP 500: boom |", "| ≈128 | — | — | (reasoning only) Okay, so |"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	r.Replies[1].Reasoning = ""
	if md := Markdown(r, MarkdownLimit); !strings.Contains(md, "| (empty) |") {
		t.Errorf("Markdown() of an empty reply lacks (empty):\n%s", md)
	}
}

func TestMarkdownLimit(t *testing.T) {
	r := sample()
	r.Verdict = Fail
	r.Serve.LogTail = []string{strings.Repeat("x", 900)}
	full := Markdown(r, MarkdownLimit)

	// Too long with the tail: the tail goes first.
	noTail := Markdown(r, len(full)-1)
	if strings.Contains(noTail, "<details>") || len(noTail) > len(full)-1 {
		t.Errorf("Markdown(limit %d) kept the tail or ran over: %d bytes", len(full)-1, len(noTail))
	}
	// Too long even without it: cut at a line with a note, within the limit.
	for _, limit := range []int{400, 1000} {
		cut := Markdown(r, limit)
		if len(cut) > limit || !strings.Contains(cut, "This report was cut to") || !strings.HasPrefix(cut, "### ❌") {
			t.Errorf("Markdown(limit %d) = %d bytes:\n%s", limit, len(cut), cut)
		}
	}
}

func TestWriteRead(t *testing.T) {
	dir := wintest.TempDir(t)
	r := sample()
	r.Run.Started = time.Date(2026, 11, 11, 0, 10, 0, 0, time.UTC)
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("Read(Write(r)) (-want +got):\n%s", diff)
	}
	md, _ := os.ReadFile(filepath.Join(dir, SummaryFile))
	if string(md) != Markdown(r, MarkdownLimit) {
		t.Errorf("summary.md is not Markdown(r)")
	}

	// The reply files are the evidence: they win over result.json's copy.
	edited := r.Replies[1]
	edited.Content = "edited"
	if err := WriteJSON(filepath.Join(dir, ReplyFile(&edited)), &edited); err != nil {
		t.Fatal(err)
	}
	got, _ = Read(dir)
	if got.Replies[1].Content != "edited" || len(got.Replies) != 2 {
		t.Errorf("Read() replies = %+v, want reply 2 from reply_2.json", got.Replies)
	}

	// A reply file whose name and number disagree is refused.
	os.WriteFile(filepath.Join(dir, "reply_7.json"), []byte(`{"n": 2}`), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "reply_7.json holds reply 2") {
		t.Errorf("Read() with a mislabelled reply = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "reply_7.json"), []byte(`{`), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "not a reply file") {
		t.Errorf("Read() with a broken reply = %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	// The system's own words for a missing file: "no such file or
	// directory" on Linux.
	_, err := os.Stat(filepath.Join(wintest.TempDir(t), "missing"))
	notFound := unwrapPath(err).Error()
	dir := wintest.TempDir(t)
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	broken := filepath.Join(dir, "broken")
	os.Mkdir(broken, 0o755)
	os.WriteFile(filepath.Join(broken, ResultFile), []byte("{"), 0o644)
	for path, want := range map[string]string{
		filepath.Join(dir, "missing"): notFound + "; pass the out directory of a run",
		file:                          "is not a directory",
		dir:                           "holds no result.json",
		broken:                        "not a result file",
	} {
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Read(%s) = %v, want %q", path, err, want)
		}
	}
}

func TestReplyFile(t *testing.T) {
	if got := ReplyFile(&measure.Reply{N: 3}); got != "reply_3.json" {
		t.Errorf("ReplyFile(reply 3) = %s", got)
	}
	if got := ReplyFile(&measure.Reply{N: 1, Warmup: true}); got != "warmup_1.json" {
		t.Errorf("ReplyFile(warm-up 1) = %s", got)
	}
}

func TestMedianAndRate(t *testing.T) {
	r := sample()
	if m, ok := r.Median(r.Rate); !ok || m < 92 || m > 93 {
		t.Errorf("Median(Rate) = %v, %v", m, ok)
	}
	r.Limits.RateSource = judge.RateServer
	r.Replies[1].Server.PredictedMS = 127 / 80.0 * 1000
	if m, ok := r.Median(r.Rate); !ok || m != 90 {
		t.Errorf("Median(server Rate) = %v, %v, want 90: the serve's own 100 and 80", m, ok)
	}
	r.Replies = nil
	if _, ok := r.Median(r.Rate); ok {
		t.Error("Median of no replies is ok")
	}
}

// One of anything is said in the singular: "over 1 reply", "After 1 reply",
// "1 reply + 1 warm-up".
func TestMarkdownOneReply(t *testing.T) {
	r := sample()
	r.Run.Replies = 1
	r.Replies = r.Replies[:1]
	r.Judged(judge.Judge(r.Input()))
	md := Markdown(r, MarkdownLimit)
	r.Replies = append(r.Replies, r.Replies[0])
	r.Replies[1].N = 2
	r.Extra = Extra{Replies: 1, Max: 2, Why: "the interval is wide"}
	r.Judged(judge.Judge(r.Input()))
	extra := Markdown(r, MarkdownLimit)
	for _, tt := range []struct{ md, want string }{
		{md, "(no interval from 1 reply; floor 60.0), median first token **250 ms** (no interval from 1 reply; limit 600), over 1 reply.\n"},
		{md, "| asked | 1 reply + 1 warm-up, max 128 tokens"},
		{extra, "over 2 replies. After 1 reply the interval is wide, so the gate took 1 more (at most 2 in all)."},
	} {
		if !strings.Contains(tt.md, tt.want) {
			t.Errorf("Markdown() lacks %q:\n%s", tt.want, tt.md)
		}
	}
}

func TestMarkdownStabilityBaselineChart(t *testing.T) {
	r := sample()
	for i := 3; i <= 9; i++ {
		rep := r.Replies[0]
		rep.N = i
		r.Replies = append(r.Replies, rep)
	}
	r.Extra = Extra{Replies: 4, Max: 15, Why: "the median rate's interval 48.8–96.6 tok/s holds the floor 60.0"}
	r.Baseline = &judge.Baseline{File: "base/result.json", Rate: 95.04, FirstTokenMS: 260}
	r.Limits.MaxRegression = ptr(0.1)
	r.Judged(judge.Judge(r.Input()))
	md := Markdown(r, MarkdownLimit)
	for _, want := range []string{
		"(96% interval 100.0–100.0, descriptive; floor 60.0)",
		"over 9 replies. After 5 replies the median rate's interval 48.8–96.6 tok/s holds the floor 60.0, so",
		"so the gate took 4 more (at most 15 in all).",
		"| baseline | base/result.json: median 95.0 tok/s, first token 260 ms; allowed change 10% |",
		"| baseline | ✅ ok | rate 100.0 tok/s against 95.0",
		"```mermaid\nxychart-beta\n    title \"Decode rate per reply (tok/s)\"\n    x-axis \"reply\" [1, 2, 3, 4, 5, 6, 7, 8, 9]\n    y-axis \"tok/s\" 0 --> 110\n    bar [100, 84.7, 100, 100, 100, 100, 100, 100, 100]\n    line [60, 60, 60, 60, 60, 60, 60, 60, 60]\n    line [95, 95, 95, 95, 95, 95, 95, 95, 95]\n```",
		"<sub>bars: each reply; first line: the floor (60.0); second line: the baseline's median (95.0)</sub>",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	// A baseline that holds its replies says what each reply is held
	// against: its medians' conservative ends, not the medians the chart
	// draws; one of too few replies, that it is not judged.
	bounded := judge.BaselineOf("base/result.json", []float64{90, 95.04, 99}, []float64{250, 260, 280})
	few := judge.BaselineOf("base/result.json", []float64{90, 95.04}, []float64{250, 260})
	for _, tt := range []struct {
		b    judge.Baseline
		want string
	}{
		{bounded, "| baseline | base/result.json: median 95.0 tok/s, first token 260 ms; allowed change 10% below its low end 90.0 tok/s and above its high end 280 ms (its 3 replies bound each median at 75%) |"},
		{few, "| baseline | base/result.json: median 92.5 tok/s, first token 255 ms; not judged: its 2 replies cannot bound its median at 75% |"},
	} {
		rc := *r
		rc.Baseline = &tt.b
		rc.Judged(judge.Judge(rc.Input()))
		if md := Markdown(&rc, MarkdownLimit); !strings.Contains(md, tt.want) {
			t.Errorf("Markdown() lacks %q:\n%s", tt.want, md)
		}
	}
	// A reply without a rate is a bar at 0, not a gap that shifts the rest.
	r.Replies[1].FirstMS = nil
	if md := Markdown(r, MarkdownLimit); !strings.Contains(md, "bar [100, 0, 100,") {
		t.Errorf("chart of a reply without a rate:\n%s", md)
	}
}

func TestMarkdownNoMath(t *testing.T) {
	r := sample()
	r.Replies[0].Content = "It costs $5, or $10 with tax."
	r.Replies[1].Error = "read $HOME/x: $PATH"
	md := Markdown(r, MarkdownLimit)
	if n, spans := strings.Count(md, "$"), strings.Count(md, "<span>$</span>"); n != spans || n != 4 {
		t.Errorf("Markdown() has %d dollar signs, %d of them in spans, want 4 and 4:\n%s", n, spans, md)
	}
}

// TestMarkdownOfAForgedResult fills every text a result.json holds with
// Markdown and HTML, as a fork's artifact may: none of it renders.
func TestMarkdownOfAForgedResult(t *testing.T) {
	const evil = "x) ![t](https://evil.example/t.png) <img src=x> [a](b) @team #1 $x$ |"
	r := sample()
	r.Verdict = Fail
	r.NoReplies = evil
	r.Extra = Extra{Replies: 1, Max: 2, Why: evil}
	r.Run.Model, r.Run.Thinking, r.Run.Prompts = evil, evil, evil
	r.Serve.Argv, r.Serve.Exit, r.Serve.Signal, r.Serve.ReadyPath = []string{evil}, evil, evil, evil
	r.Hold.Mode, r.Hold.Device = evil, evil
	r.GitHub = &GitHubFacts{SHA: evil, Runner: evil, RunURL: evil}
	r.Baseline = &judge.Baseline{File: evil, Rate: 1, FirstTokenMS: 1}
	for i := range r.Replies {
		r.Replies[i].Prompt, r.Replies[i].Content = evil, evil
	}
	r.Assertions[0].Detail = evil
	md := Markdown(r, MarkdownLimit)
	for _, raw := range []string{"![t]", "](", "<img", "@team", " #1", "$x$", "x |"} {
		if strings.Contains(md, raw) {
			t.Errorf("Markdown() of a forged result holds %q raw:\n%s", raw, md)
		}
	}
}

func TestLink(t *testing.T) {
	tests := []struct{ u, want string }{
		{"https://github.com/acme/serve/actions/runs/77/attempts/2", "[logs](https://github.com/acme/serve/actions/runs/77/attempts/2)"},
		{"https://ghes.example:8443/acme/serve/actions/runs/7", "[logs](https://ghes.example:8443/acme/serve/actions/runs/7)"},
		{"x) ![t](https://evil.example/t.png", `x\) \!\[t\]\(https` + "\u200d" + `://evil.example/t.png`},
		{"javascript:alert(1)", `javascript:alert\(1\)`},
		{"https://a.example/<img src=x>", "https\u200d://a.example/&lt;img src=x&gt;"},
	}
	for _, tt := range tests {
		if got := link("logs", tt.u); got != tt.want {
			t.Errorf("link(logs, %q) = %q, want %q", tt.u, got, tt.want)
		}
	}
}

func TestIntervalText(t *testing.T) {
	tests := []struct {
		iv   stats.Interval
		prec int
		want string
	}{
		{stats.Interval{N: 1, Median: 50, Lo: 50, Hi: 50, Coverage: 0}, 1, "no interval from 1 reply"},
		{stats.Interval{N: 2, Median: 55, Lo: 50, Hi: 60, Coverage: 0.5}, 1, "no interval from 2 replies"},
		{stats.Interval{N: 3, Median: 55, Lo: 50, Hi: 60, Coverage: 0.75}, 1, "75% interval 50.0–60.0, descriptive"},
		{stats.Interval{N: 9, Median: 264, Lo: 250.4, Hi: 277.6, Coverage: 0.9609375}, 0, "96% interval 250–278, descriptive"},
	}
	for _, tt := range tests {
		if got := IntervalText(&tt.iv, tt.prec); got != tt.want {
			t.Errorf("IntervalText(%+v, %d) = %q, want %q", tt.iv, tt.prec, got, tt.want)
		}
	}
}

func TestCoverageWords(t *testing.T) {
	for cov, want := range map[float64]string{0.9375: "93.7% interval", 0.96484375: "96.4% interval", 0.5: "50% interval", 0.99: "99% interval"} {
		if got := coverage(&stats.Interval{Coverage: cov}); got != want {
			t.Errorf("coverage(%v) = %q, want %q", cov, got, want)
		}
	}
}

// TestReplyTableFigures: how each reply's rate was had, a count not believed,
// the serve's own figure and a disagreement, a prompt cache hit and a retry
// are in the reply table, and in result.json's figures.
func TestReplyTableFigures(t *testing.T) {
	r := sample()
	words := strings.Repeat("word ", 40)
	r.Replies = []measure.Reply{
		{N: 1, Prompt: "a", Content: words, MaxTokens: 32, FirstMS: ptr(300.0), LastMS: ptr(380.0), CompletionTokens: ptr(9), Chunks: 9,
			Arrivals: []measure.Arrival{{MS: 300, Chunks: 1}, {MS: 340, Chunks: 4}, {MS: 380, Chunks: 4}},
			Server:   &measure.ServerTimings{PredictedN: 9, PredictedMS: 100, CacheN: ptr(29), PromptN: ptr(1)}},
		{N: 2, Prompt: "b", Content: words, MaxTokens: 32, FirstMS: ptr(300.0), LastMS: ptr(300.1), CompletionTokens: ptr(16), Chunks: 16,
			Arrivals: []measure.Arrival{{MS: 300, Chunks: 16}}, PromptTokens: ptr(30), CachedTokens: ptr(4)},
		{N: 3, Prompt: "c", Content: words, MaxTokens: 32, FirstMS: ptr(300.0), LastMS: ptr(1800.0), CompletionTokens: ptr(1000), Chunks: 16,
			Retried: `Post "http://127.0.0.1:1/v1/chat/completions": EOF`},
	}
	r.Judged(judge.Judge(r.Input()))
	md := Markdown(r, MarkdownLimit)
	for _, want := range []string{
		"| 1 | a | 300 ms | 100.0 tok/s (regression, 3 arrivals) | 9 | 80.0 tok/s (differs 25%) | **hit** 29/30 |",
		"| 2 | b | 300 ms | — (one burst) | 16 | — | 4/30 |",
		"| 3 | c | 300 ms | — | ≈16 (the serve's count not believed) | — | — | (asked twice: the first attempt failed before any answer: Post &quot;http\u200d://127.0.0.1:1/v1/chat/completions&quot;: EOF) word",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	if len(r.Figures) != 3 {
		t.Fatalf("Figures = %+v, want one a reply", r.Figures)
	}
	f := r.Figures[0]
	if f.Rate.Method != measure.MethodRegression || f.Rate.Arrivals != 3 || f.Server.Method != measure.MethodServer || f.Cache == nil || !f.Cache.Hit || f.Disagreement == nil || *f.Disagreement != 0.25 {
		t.Errorf("Figures[0] = %+v, want the regression over 3 arrivals, the serve's (n-1)/predicted_ms, a cache hit, 25%% apart", f)
	}
	if f := r.Figures[1]; f.Rate.Why != measure.Burst || f.Cache == nil || f.Cache.Hit {
		t.Errorf("Figures[1] = %+v, want a burst and no cache hit", f)
	}
	if f := r.Figures[2]; f.Tokens.Source != measure.SourceChunks || f.Tokens.Doubt == "" || !f.Retried {
		t.Errorf("Figures[2] = %+v, want the chunks counted, the doubt said, the retry marked", f)
	}
}

// A run whose stop left processes of the serve alive, or whose ticket was
// lost, or whose supervisor was found stopped, fails on the release
// assertion, judged from result.json's facts (so re-judging keeps it).
func TestReleaseFactsFailTheRun(t *testing.T) {
	for name, set := range map[string]func(r *Result){
		"survivors":  func(r *Result) { r.Serve.Survivors, r.Serve.Left = 2, []string{"12 sleep 600", "13 llama-server"} },
		"lost":       func(r *Result) { r.Hold.Lost = "the ticket npu.h.1 was not locked any more" },
		"stopped":    func(r *Result) { r.Serve.SupervisorStopped = 1 },
		"clean":      func(r *Result) {},
		"swept only": func(r *Result) { r.Serve.Swept = 3 },
	} {
		r := sample()
		set(r)
		var b bytes.Buffer
		r.Judged(judge.Judge(r.Input()))
		Console(&b, r)
		clean := name == "clean" || name == "swept only"
		if r.Pass() != clean || strings.Contains(b.String(), "release ") == clean {
			t.Errorf("%s: verdict %s, want pass %v:\n%s", name, r.Verdict, clean, b.String())
		}
	}
}

// What became of asking for logprobs is said in the summary, the serve's
// words of a refusal escaped for the table.
func TestLogprobsText(t *testing.T) {
	sent := measure.Reply{TopLogprobs: 5, Logprobs: measure.LogprobsSent}
	none := measure.Reply{TopLogprobs: 5, Logprobs: measure.LogprobsNone}
	refused := measure.Reply{Logprobs: measure.LogprobsRefused, LogprobsDetail: "HTTP 400: logprobs | not <b>supported</b>\nhere"}
	garbage := measure.Reply{TopLogprobs: 5, Logprobs: measure.LogprobsGarbage, LogprobsDetail: "a logprob of NaN"}
	tests := []struct {
		name    string
		replies []measure.Reply
		want    string
	}{
		{"not asked", []measure.Reply{{}, {}}, ""},
		{"sent", []measure.Reply{sent, sent}, "top 5 asked: sent with 2 of 2 replies"},
		{"some sent none", []measure.Reply{sent, none, sent}, "top 5 asked: sent with 2 of 3 replies; none sent with 1"},
		{"garbage", []measure.Reply{garbage, sent}, "top 5 asked: sent with 1 of 2 replies; dropped from 1 as not to be believed: a logprob of NaN"},
		{"refused", []measure.Reply{refused, refused},
			"refused by the serve (asked again without them, 2 replies): " + Cell(refused.LogprobsDetail, 120)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LogprobsText(tt.replies); got != tt.want {
				t.Errorf("LogprobsText() = %q, want %q", got, tt.want)
			}
		})
	}
	md := Markdown(&Result{Verdict: Fail, Replies: []measure.Reply{refused}}, 1<<20)
	if !strings.Contains(md, "| logprobs | refused by the serve") || strings.Contains(md, "<b>") || strings.Contains(md, "logprobs | not") {
		t.Errorf("Markdown does not say the refusal in one escaped row:\n%s", md)
	}
}

// Prepare, run while a result is rendered (the gate runs it while the serve
// loads, beside its log and its first requests), changes nothing of what
// is rendered, and writes nothing.
func TestPrepareChangesNothing(t *testing.T) {
	t.Chdir(wintest.TempDir(t))
	var console bytes.Buffer
	Console(&console, sample())
	md := Markdown(sample(), MarkdownLimit)
	js, err := resultBytes(ResultFile, sample())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Prepare()
	}()
	var console2 bytes.Buffer
	Console(&console2, sample())
	js2, err := resultBytes(ResultFile, sample())
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if d := cmp.Diff(console.String(), console2.String()); d != "" {
		t.Errorf("Console beside Prepare (-before +after):\n%s", d)
	}
	if d := cmp.Diff(md, Markdown(sample(), MarkdownLimit)); d != "" {
		t.Errorf("Markdown after Prepare (-before +after):\n%s", d)
	}
	if d := cmp.Diff(string(js), string(js2)); d != "" {
		t.Errorf("result.json beside Prepare (-before +after):\n%s", d)
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("Prepare wrote %v", entries)
	}
}
