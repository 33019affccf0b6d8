package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// ReferenceWant is what a reference must share with the run it is compared
// with: the same max_tokens and thinking setting, and a reply to every
// prompt of the run's first round. Asked is every prompt the run can ask:
// the reference's replies to others are not kept.
type ReferenceWant struct {
	MaxTokens  int
	Thinking   string
	FirstRound []string
	Asked      []string
}

// ReferenceWant is what the plan asks of a reference: the words of every
// request of the rounds its replies 1 to --max-replies (or --replies when
// higher) reach, the first round being one reply to each prompt of the set.
func (p *Plan) ReferenceWant() ReferenceWant {
	w := ReferenceWant{MaxTokens: p.MaxTokens, Thinking: p.Thinking}
	if len(p.Prompts) == 0 {
		return w
	}
	// Each round asks every prompt once, in an order drawn for the run, and
	// a request's words depend on its prompt and round alone: a round the
	// run may end part way through can ask any of its prompts.
	most := max(p.Replies, p.MaxReplies)
	rounds := (most + len(p.Prompts) - 1) / len(p.Prompts)
	for r := 1; r <= rounds; r++ {
		for i := range p.Prompts {
			text := prompts.Asked(p.Prompts, i, r).Prompt
			if r == 1 {
				w.FirstRound = append(w.FirstRound, text)
			}
			w.Asked = append(w.Asked, text)
		}
	}
	return w
}

// checkReference reads and checks a --reference PATH into p.Reference; a
// github:PATTERN is checked as a pattern here and resolved by the command.
func (c Config) checkReference(p *Plan) error {
	if c.Reference == "" {
		return nil
	}
	if c.Kind == report.KindReference {
		return fmt.Errorf("--reference %s: record makes a reference and compares with none; leave --reference out", c.Reference)
	}
	if pattern, ok := strings.CutPrefix(c.Reference, history.Prefix); ok {
		if _, _, err := history.Spec(history.Prefix + pattern); err != nil {
			return fmt.Errorf("--reference %v", strings.TrimPrefix(err.Error(), "--baseline "))
		}
		return nil
	}
	if len(p.Prompts) == 0 {
		return nil // the prompts' own error says why
	}
	res, err := LoadReference(c.Reference)
	if err != nil {
		return err
	}
	p.Reference, err = UseReference("--reference "+c.Reference, c.Reference, res, p.ReferenceWant())
	return err
}

// LoadReference reads a reference run: its out directory (result.json and
// the reply files) or its result.json.
func LoadReference(path string) (*report.Result, error) {
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("--reference %s: %v; pass the out directory (or result.json) of a run made on the trusted route, e.g. by npu-serve-smoke record (docs/workflow.md)", path, err)
	}
	var res *report.Result
	switch {
	case fi.IsDir():
		res, err = report.Read(path)
	case filepath.Base(path) == report.ResultFile:
		// result.json keeps no tokens: they are in the reply files
		// beside it, which its directory's read takes.
		res, err = report.Read(filepath.Dir(path))
	default:
		res, err = report.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--reference: %v; pass the out directory (or result.json) of a run made on the trusted route, e.g. by npu-serve-smoke record (docs/workflow.md)", err)
	}
	return res, nil
}

// UseReference checks the reference run res (named input, found at from)
// against w, and gives it as the run keeps it: its replies to the prompts
// the run can ask, each with what the agreement reads. Every difference is
// said at once, naming the input and what to do.
func UseReference(input, from string, res *report.Result, w ReferenceWant) (*report.Reference, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(input+": "+format, args...))
	}
	if res.Run.MaxTokens != w.MaxTokens {
		bad("the reference was asked with max_tokens %d, this run asks %d; pass --max-tokens %d, or record the reference again with --max-tokens %d",
			res.Run.MaxTokens, w.MaxTokens, res.Run.MaxTokens, w.MaxTokens)
	}
	if res.Run.Thinking != w.Thinking {
		bad("the reference was asked with thinking %s, this run with thinking %s; pass --thinking %s, or record the reference again with --thinking %s",
			quote.Cut(res.Run.Thinking, 10), w.Thinking, quote.Cut(res.Run.Thinking, 10), w.Thinking)
	}
	asked := map[string]bool{}
	for _, p := range w.Asked {
		asked[p] = true
	}
	if lost := unwrittenReplies(res.Unwritten); len(lost) > 0 {
		// The tokens the agreement compares are in the reply files only.
		bad("its out directory lacks reply files, and with them those replies' tokens (%s); record the reference again", strings.Join(lost, "; "))
	}
	ref := &report.Reference{File: from, Kind: "run", Verdict: res.Verdict}
	if res.Run.Kind == report.KindReference {
		ref.Kind = report.KindReference
	}
	has := map[string]bool{}
	for _, r := range res.Replies {
		if !asked[r.Prompt] || r.Warmup {
			continue
		}
		if r.Error != "" || strings.TrimSpace(r.Content) == "" {
			why := "no content"
			if r.Error != "" {
				why = "the error " + quote.Cut(r.Error, 80)
			}
			bad("its reply %d (to %s) has %s; a reference's replies must all have content: record the reference again", r.N, quote.Cut(r.Prompt, 60), why)
			continue
		}
		has[r.Prompt] = true
		ref.Replies = append(ref.Replies, report.KeepForAgreement(r))
		if r.Logprobs == measure.LogprobsSent && len(r.Generated) > 0 {
			ref.Checked.Logprobs++
		}
	}
	var missing []string
	for _, p := range w.FirstRound {
		if !has[p] {
			missing = append(missing, quote.Cut(p, 60))
		}
	}
	if len(res.Replies) == 0 {
		bad("the reference holds no replies; pass a run that has some (its verdict: %s)", quote.Cut(res.Verdict, 20))
	} else if len(missing) > 0 {
		named := missing
		if len(named) > 3 {
			named = append(named[:3:3], fmt.Sprintf("and %d more", len(missing)-3))
		}
		bad("the reference holds no reply with content to %d of this run's %d first-round prompts (%s); record it with the same --prompts, and --replies at least %d",
			len(missing), len(w.FirstRound), strings.Join(named, ", "), len(w.Asked))
	}
	ref.Checked.MaxTokens, ref.Checked.Thinking = w.MaxTokens, w.Thinking
	ref.Checked.Prompts, ref.Checked.Replies = len(w.FirstRound), len(ref.Replies)
	if b, err := json.Marshal(ref.Replies); err == nil && len(b) > report.MaxReference {
		bad("its replies to this run's prompts come to %d bytes, more than the %d out/%s may hold; record it with --max-tokens or --max-replies as this run's", len(b), report.MaxReference, report.ReferenceFile)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ref, nil
}

// unwrittenReplies is those of a run's unwritten files ("name: why") that
// are judged replies' (reply_N.json), not warm-ups', each cut to 200 bytes:
// the list is the run's, untrusted.
func unwrittenReplies(unwritten []string) []string {
	var out []string
	for _, u := range unwritten {
		if strings.HasPrefix(u, "reply_") {
			out = append(out, quote.Cut(u, 200))
		}
	}
	return out
}
