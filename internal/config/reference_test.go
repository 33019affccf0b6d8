package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// recorded is a reference run as record writes it: one reply to each prompt
// of the built-in set's first three rounds, with content and logprobs.
func recorded() *report.Result {
	res := &report.Result{Schema: report.Schema, Verdict: report.Pass,
		Run: report.RunFacts{MaxTokens: 128, Thinking: "off", Kind: report.KindReference}}
	ps := prompts.Builtin()
	for n := 1; n <= 15; n++ {
		res.Replies = append(res.Replies, measure.Reply{N: n, Prompt: prompts.Asked(ps, (n-1)%len(ps), (n-1)/len(ps)+1).Prompt, Content: "word word",
			Arrivals: []measure.Arrival{{MS: 1, Chunks: 1}}, Logprobs: measure.LogprobsSent,
			Generated: []measure.Token{{Text: "word", Logprob: -0.1}, {Text: " word", Logprob: -0.2}}})
	}
	return res
}

// writeReference writes res as a run's out directory and gives its path.
func writeReference(t *testing.T, res *report.Result) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ref")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The replies in their own files too, as a run writes them: each file
	// is bounded on its own. A reference too large for result.json has
	// them there only.
	replies := res.Replies
	if len(replies) > 0 && len(replies[0].Generated) > 0 && len(replies[0].Generated[0].Text) > 1000 {
		res.Replies = nil
		defer func() { res.Replies = replies }()
	}
	if err := report.WriteJSON(filepath.Join(dir, report.ResultFile), res); err != nil {
		t.Fatal(err)
	}
	for i := range replies {
		if err := report.WriteJSON(filepath.Join(dir, report.ReplyFile(&replies[i])), &replies[i]); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckReference(t *testing.T) {
	dir := writeReference(t, recorded())
	for _, path := range []string{dir, filepath.Join(dir, report.ResultFile)} {
		c := good(t)
		c.Reference = path
		p, err := c.Check(found("llama-server"))
		if err != nil {
			t.Fatalf("Check() with --reference %s: %v", path, err)
		}
		ref := p.Reference
		if ref == nil {
			t.Fatalf("Check() with --reference %s: no reference in the plan", path)
		}
		if ref.File != path || ref.Kind != report.KindReference || ref.Verdict != report.Pass {
			t.Errorf("reference = %+v, want file %s, kind reference, verdict pass", ref, path)
		}
		want := report.Checked{MaxTokens: 128, Thinking: "off", Prompts: 5, Replies: 15, Logprobs: 15}
		if ref.Checked != want {
			t.Errorf("Checked = %+v, want %+v", ref.Checked, want)
		}
		if len(ref.Replies) != 15 || ref.Replies[0].Arrivals != nil || len(ref.Replies[0].Generated) != 2 {
			t.Errorf("replies kept = %d, the first %+v; want 15, with the tokens and without the arrivals", len(ref.Replies), ref.Replies[0])
		}
		if l := c.Limits(); l.Agreement.TieMargin != c.AgreementTieMargin || l.Agreement.MaxKL != c.AgreementMaxKL {
			t.Errorf("Limits().Agreement = %+v, want the flags' %v, %v", l.Agreement, c.AgreementTieMargin, c.AgreementMaxKL)
		}
	}
}

// Only the replies to prompts the run can ask are kept: a run of
// --max-replies 3 asks three of the first round's five, which three drawn
// for the run, so the five are kept, and the later rounds' are not.
func TestCheckReferenceKeepsAsked(t *testing.T) {
	c := good(t)
	c.Reference = writeReference(t, recorded())
	c.Replies, c.MaxReplies = 3, 3
	p, err := c.Check(found("llama-server"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Reference.Checked; got.Replies != 5 || got.Prompts != 5 {
		t.Errorf("Checked = %+v, want 5 replies kept and 5 first-round prompts", got)
	}
}

// A run recorded with github: is checked later, by the command; here only
// its pattern.
func TestCheckReferenceGitHub(t *testing.T) {
	c := good(t)
	c.Reference = "github:reference/**"
	p, err := c.Check(found("llama-server"))
	if err != nil || p.Reference != nil {
		t.Errorf("Check(--reference github:reference/**) = %v, %v; want no reference yet and no error", p.Reference, err)
	}
	c.Reference = "github:refs/tags/v1"
	if _, err := c.Check(found("llama-server")); err == nil || !strings.Contains(err.Error(), "--reference github:refs/tags/v1: runs are listed by their branch or tag name, without refs/tags/; pass github:v1") {
		t.Errorf("Check(--reference github:refs/tags/v1) error = %v", err)
	}
}

func TestCheckReferenceBad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *Config, res *report.Result)
		want   []string
	}{
		{"max tokens", func(c *Config, res *report.Result) { c.MaxTokens = 64 },
			[]string{"the reference was asked with max_tokens 128, this run asks 64; pass --max-tokens 128, or record the reference again with --max-tokens 64"}},
		{"thinking", func(c *Config, res *report.Result) { res.Run.Thinking = "on" },
			[]string{`the reference was asked with thinking "on", this run with thinking off; pass --thinking "on", or record the reference again with --thinking off`}},
		{"prompts", func(c *Config, res *report.Result) { res.Replies = res.Replies[:3] },
			[]string{`the reference holds no reply with content to 2 of this run's 5 first-round prompts ("List twenty`, "record it with the same --prompts, and --replies at least 15"}},
		{"four missing named as three and more", func(c *Config, res *report.Result) { res.Replies = res.Replies[:1] },
			[]string{"to 4 of this run's 5 first-round prompts", ", and 1 more)"}},
		{"no replies", func(c *Config, res *report.Result) { res.Replies, res.Verdict = nil, report.Fail },
			[]string{`the reference holds no replies; pass a run that has some (its verdict: "fail")`}},
		{"empty reply", func(c *Config, res *report.Result) { res.Replies[1].Content = " " },
			[]string{"its reply 2 (to ", ") has no content; a reference's replies must all have content: record the reference again"}},
		{"error reply", func(c *Config, res *report.Result) { res.Replies[6].Error = "HTTP 500\x1b[2J" },
			[]string{`its reply 7 (to "Request 2.2: `, `has the error "HTTP 500\x1b[2J"`}},
		{"too large", func(c *Config, res *report.Result) {
			// Each reply file within a run file's bound, all of them
			// past out/reference.json's: 15 replies of a token of
			// 1.2 MB (as many bytes in tokens of a few bytes are
			// 50,000 objects a reply, seconds to encode and decode).
			long := strings.Repeat("w", 1_200_000)
			for i := range res.Replies {
				res.Replies[i].Generated = []measure.Token{{Text: long}}
			}
		}, []string{"its replies to this run's prompts come to ", "more than the 16777216 out/reference.json may hold"}},
		{"record", func(c *Config, res *report.Result) { c.Kind = report.KindReference },
			[]string{"record makes a reference and compares with none; leave --reference out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good(t)
			res := recorded()
			tc.change(&c, res)
			c.Reference = writeReference(t, res)
			_, err := c.Check(found("llama-server"))
			if err == nil {
				t.Fatal("Check() = nil error, want bad input")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check() error =\n%v\nwant it to say %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "--reference "+c.Reference) {
				t.Errorf("Check() error = %v, want it to name --reference %s", err, c.Reference)
			}
			if _, serr := os.Stat(c.Out); serr == nil {
				t.Errorf("Check() created --out %s for a bad reference", c.Out)
			}
		})
	}
}

func TestCheckReferenceUnreadable(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "foreign.json"), []byte(`{"schema": "other/v1"}`), 0o644)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "nowhere"), "nowhere: no such file or directory; pass the out directory (or result.json) of a run made on the trusted route"},
		{filepath.Join(dir, "foreign.json"), `schema "other/v1"`},
		{dir, "holds no result.json"},
	} {
		c := good(t)
		c.Reference = tc.path
		if _, err := c.Check(found("llama-server")); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--reference") {
			t.Errorf("Check(--reference %s) error = %v, want it to name --reference and say %q", tc.path, err, tc.want)
		}
	}
}

func TestCheckAgreementBounds(t *testing.T) {
	for _, tc := range []struct {
		tie, kl float64
		want    string
	}{
		{-0.1, 0.01, "--agreement-tie-margin -0.1: pass a margin in nats, 0 or more"},
		{0.1, -1, "--agreement-max-kl -1: pass a distance in nats, 0 or more"},
	} {
		c := good(t)
		c.AgreementTieMargin, c.AgreementMaxKL = tc.tie, tc.kl
		if _, err := c.Check(found("llama-server")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(tie %v, kl %v) error = %v, want %q", tc.tie, tc.kl, err, tc.want)
		}
	}
}

func TestCheckRecordNoBaseline(t *testing.T) {
	c := good(t)
	c.Kind = report.KindReference
	c.Baseline = "base.json"
	if _, err := c.Check(found("llama-server")); err == nil || !strings.Contains(err.Error(), "--baseline base.json: record makes a reference, whose rate and first token are recorded, not judged") {
		t.Errorf("Check(record --baseline) error = %v", err)
	}
}
