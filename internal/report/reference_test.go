package report

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// withReference is sample() compared with a reference that gave reply 1's
// answer and, to reply 2's prompt, another one from its third token.
func withReference() *Result {
	r := sample()
	r.Replies[1].Prompt = "Describe caches"
	for i := range r.Replies {
		r.Replies[i].Logprobs = measure.LogprobsSent
		r.Replies[i].Content = "A cache holds" // the tokens' texts: the agreement compares tokens only when they are the content
		r.Replies[i].Generated = []measure.Token{{Text: "A", Logprob: -0.1}, {Text: " cache", Logprob: -0.2}, {Text: " holds", Logprob: -0.3}}
	}
	ref := []measure.Reply{KeepForAgreement(r.Replies[0]), KeepForAgreement(r.Replies[1])}
	ref[1].Generated = []measure.Token{{Text: "A", Logprob: -0.1}, {Text: " cache", Logprob: -0.2},
		{Text: " |<b>@x", Logprob: -0.01, Top: []measure.Alt{{Text: " |<b>@x", Logprob: -0.01}, {Text: " holds", Logprob: -9}}}}
	ref[1].Content = "A cache |<b>@x"
	r.Reference = &Reference{File: "ref/result.json", Kind: KindReference, Verdict: Pass,
		Checked: Checked{MaxTokens: 128, Thinking: "off", Prompts: 2, Replies: 2, Logprobs: 2}, Replies: ref}
	r.Judged(judge.Judge(r.Input()))
	return r
}

func TestReferenceJudged(t *testing.T) {
	r := withReference()
	if len(r.Agreement) != 2 || !r.Agreement[0].OK || r.Agreement[1].OK {
		t.Fatalf("Agreement = %+v, want reply 1 agreeing and reply 2 not", r.Agreement)
	}
	last := r.Assertions[len(r.Assertions)-1]
	if last.Name != judge.Agreement || last.OK || r.Verdict != Fail {
		t.Errorf("assertions = %+v, verdict %s; want a failed agreement and a FAIL", r.Assertions, r.Verdict)
	}
	// Without a reference, no agreement.
	r.Reference = nil
	r.Judged(judge.Judge(r.Input()))
	if r.Agreement != nil || r.Assertions[len(r.Assertions)-1].Name == judge.Agreement {
		t.Errorf("without a reference: agreement %+v, assertions %+v", r.Agreement, r.Assertions)
	}
}

func TestReferenceMarkdown(t *testing.T) {
	md := Markdown(withReference(), MarkdownLimit)
	for _, want := range []string{
		"| # | prompt | first token | decode | tokens | serve's rate | prompt cache | agrees | reply |\n|---:|---|---:|---:|---:|---:|---:|---|---|\n",
		"| 3/3 | A cache holds |",
		"| ❌ 2/3, disagrees: the reference &quot; &#124;&lt;b&gt;@",
		"| reference | ref/result.json (reference): 2 replies kept, 2 with logprobs; the same max_tokens (128), thinking (off) and 2 first-round prompts |",
		"<sub>agrees: the tokens",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	for _, bad := range []string{"<b>", "@x"} {
		if strings.Contains(md, bad) {
			t.Errorf("Markdown() carries the serve's %q as it came", bad)
		}
	}
	if md := Markdown(sample(), MarkdownLimit); strings.Contains(md, "agrees") || strings.Contains(md, "| reference |") {
		t.Errorf("Markdown() of a run without a reference has an agreement column or row:\n%s", md)
	}
}

func TestAgreesText(t *testing.T) {
	gap := 0.02
	kl := 0.0012
	for _, tc := range []struct {
		a    agree.Reply
		want string
	}{
		{agree.Reply{N: 1}, "not in the reference"},
		{agree.Reply{N: 1, RefN: 1, Unit: agree.UnitTokens, Agree: 128, Of: 128, OK: true}, "128/128"},
		{agree.Reply{N: 1, RefN: 2, Unit: agree.UnitTokens, Agree: 41, Of: 128, KL: &kl, OK: true, Diverged: &agree.Divergence{Tie: true, Gap: &gap}}, "41/128 tie (gap 0.02), KL 0.0012"},
		{agree.Reply{N: 1, RefN: 2, Unit: agree.UnitBytes, Agree: 9, Of: 20, OK: true}, "9/20 bytes (text only)"},
		{agree.Reply{N: 3, RefN: 3, Unit: agree.UnitTokens, Agree: 6, Of: 128, Diverged: &agree.Divergence{Ref: measure.Alt{Text: " Paris"}, Run: measure.Alt{Text: " //\n"}}},
			`❌ 6/128, disagrees: the reference " Paris", this run " //\n"`},
	} {
		if got := AgreesText(tc.a); got != tc.want {
			t.Errorf("AgreesText(%+v) = %q, want %q", tc.a, got, tc.want)
		}
	}
	if got := AgreesCell(nil, 1); got != "—" {
		t.Errorf("AgreesCell() of a reply not compared = %q", got)
	}
}

// record's run: content and release judged, the rest recorded with its
// detail and not judged.
func TestNotJudged(t *testing.T) {
	r := sample()
	r.Replies[0].FirstMS, r.Replies[1].FirstMS = ptr(5000.0), ptr(5000.0) // far past the limit
	r.Route = route.Evidence{}
	r.Run.Kind = KindReference
	r.Judged(judge.Judge(r.Input()))
	if r.Verdict != Pass {
		t.Errorf("a reference on the slow route with a slow first token: verdict %s, want pass: %+v", r.Verdict, r.Assertions)
	}
	for _, a := range r.Assertions {
		notJudged := strings.HasPrefix(a.Detail, NotJudgedWhy)
		if want := a.Name != judge.Content; notJudged != want {
			t.Errorf("assertion %s: %q; recorded, not judged: %v, want %v", a.Name, a.Detail, notJudged, want)
		}
	}
	r.Replies[1].Content = ""
	r.Judged(judge.Judge(r.Input()))
	if r.Verdict != Fail {
		t.Errorf("a reference with an empty reply: verdict %s, want fail", r.Verdict)
	}
	r.Serve.Survivors = 1
	v := NotJudged(judge.Judge(r.Input()))
	for _, a := range v.Assertions {
		if a.Name == judge.Released && a.OK {
			t.Errorf("release judged ok with a survivor: %+v", a)
		}
	}
}

func TestReferenceFile(t *testing.T) {
	dir := wintest.TempDir(t)
	r := withReference()
	// As the gate writes them: reference.json, then result.json with its
	// digest.
	if err := WriteReference(dir, r.Reference); err != nil {
		t.Fatal(err)
	}
	if len(r.Reference.SHA256) != 64 {
		t.Fatalf("WriteReference() set SHA256 %q, want the file's digest", r.Reference.SHA256)
	}
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Reference, got.Reference); diff != "" {
		t.Errorf("Read() reference (-wrote +read):\n%s", diff)
	}
	// Without reference.json (a run made before references were kept, or
	// an artifact without it): the facts stay, the replies are none.
	os.Remove(filepath.Join(dir, ReferenceFile))
	if got, err = Read(dir); err != nil || got.Reference == nil || got.Reference.Replies != nil ||
		got.Reference.File != "ref/result.json (its replies are not in reference.json: pass --reference again)" {
		t.Errorf("Read() without reference.json = %+v, %v; want the facts, no replies, and why in its file", got.Reference, err)
	}

	// A link or a foreign file is refused.
	t.Run("a link", func(t *testing.T) {
		wintest.Symlink(t, "/etc/passwd", filepath.Join(dir, ReferenceFile))
		defer os.Remove(filepath.Join(dir, ReferenceFile))
		if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Errorf("Read() with reference.json a link: %v", err)
		}
	})

	// Any other file there is not the one the run compared with: not read,
	// whatever it holds (a foreign file, the same reference with one reply
	// changed), and said in the reference's File.
	changed := *r.Reference
	changed.Replies = slices.Clone(changed.Replies)
	changed.Replies[0].Content = "changed"
	other := wintest.TempDir(t)
	if err := WriteReference(other, &changed); err != nil {
		t.Fatal(err)
	}
	changedFile, _ := os.ReadFile(filepath.Join(other, ReferenceFile))
	for name, body := range map[string][]byte{
		"foreign": []byte(`{"schema": "other/v1", "reference": {}}`),
		"changed": changedFile,
	} {
		os.WriteFile(filepath.Join(dir, ReferenceFile), body, 0o644)
		got, err := Read(dir)
		if err != nil || got.Reference == nil || got.Reference.Replies != nil ||
			!strings.HasPrefix(got.Reference.File, "ref/result.json (reference.json is not the file this run compared with (sha256 ") ||
			!strings.HasSuffix(got.Reference.File, "... as result.json recorded): pass --reference again)") {
			t.Errorf("Read() with a %s reference.json = %+v, %v; want no replies, and why in its file", name, got.Reference, err)
		}
	}
	// A result.json that records no digest (a run made before it was kept,
	// or one edited): the file is not read.
	r.Reference.SHA256 = ""
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ReferenceFile), changedFile, 0o644)
	if got, err := Read(dir); err != nil || got.Reference == nil || got.Reference.Replies != nil ||
		!strings.Contains(got.Reference.File, "result.json records no digest of reference.json") {
		t.Errorf("Read() of a result.json without a digest = %+v, %v; want no replies, and why in its file", got.Reference, err)
	}
	// A result.json that names no reference: reference.json is not read,
	// and there is no agreement to judge.
	r.Reference = nil
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(dir); err != nil || got.Reference != nil {
		t.Errorf("Read() of a run without a reference, reference.json beside it = %+v, %v; want no reference", got.Reference, err)
	}
	r = withReference()

	// More than a run's file may be is not written.
	big := *r.Reference
	big.Replies = []measure.Reply{{N: 1, Content: strings.Repeat("x", MaxReference)}}
	if err := WriteReference(wintest.TempDir(t), &big); err == nil || !strings.Contains(err.Error(), "more than the 16777216 a run's file may be") {
		t.Errorf("WriteReference() of %d bytes: %v", MaxReference, err)
	}
}
