package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// ReferenceFile is the reference's replies as the run compared with them, in
// out/, so `judge DIR` judges the agreement again offline.
const ReferenceFile = "reference.json"

// Run kinds, in result.json's run.kind.
const (
	KindRun       = ""          // a gate's run
	KindReference = "reference" // recorded by `record`: a trusted route's replies
)

// MaxReference bounds the reference's replies kept in out/reference.json,
// in bytes: the reference is a file from elsewhere, and the file is read back
// from an artifact under the same bound as every run's file (MaxFile).
const MaxReference = MaxFile

// Reference is the trusted route's run the agreement is judged against:
// where it came from, what kind of run it is, and what was checked before the
// run started. Its replies are kept in out/reference.json, not in
// result.json.
type Reference struct {
	File string `json:"file"` // a path, or the run of github:PATTERN
	Kind string `json:"kind"` // "reference" (recorded by record) or "run" (a gate's run)
	// Verdict is the reference run's own verdict.
	Verdict string `json:"verdict,omitempty"`
	// Checked says what was found the same as this run's before it
	// started: max_tokens, thinking, and the prompts of its first round.
	Checked Checked `json:"checked"`
	// Replies are the reference's replies to the prompts this run can ask,
	// each kept with what the agreement reads (KeepForAgreement).
	Replies []measure.Reply `json:"-"`
	// Missing says why no usable reference was found where one was asked
	// for (--reference github:PATTERN): the agreement assertion then fails,
	// saying so. No replies are kept.
	Missing string `json:"missing,omitempty"`
}

// Checked is what a reference was checked to share with the run.
type Checked struct {
	MaxTokens int    `json:"max_tokens"`
	Thinking  string `json:"thinking"`
	Prompts   int    `json:"prompts"`  // the run's first-round prompts, every one in the reference
	Replies   int    `json:"replies"`  // the reference's replies kept, to the prompts the run can ask
	Logprobs  int    `json:"logprobs"` // of them, with logprobs
}

// Judge is the reference as the judge reads it.
func (r *Reference) Judge() *judge.Reference {
	if r == nil {
		return nil
	}
	return &judge.Reference{File: r.File, Replies: r.Replies, Missing: r.Missing}
}

// referenceFile is out/reference.json.
type referenceFile struct {
	Schema    string          `json:"schema"`
	Reference *Reference      `json:"reference"`
	Replies   []measure.Reply `json:"replies"`
}

// KeepForAgreement is a reference reply with only what the agreement and
// the checks read: its prompt, content, reasoning, the tokens with their
// logprobs and how they were asked. Timings and arrivals are left out.
func KeepForAgreement(r measure.Reply) measure.Reply {
	return measure.Reply{
		N: r.N, Prompt: r.Prompt, MaxTokens: r.MaxTokens, Content: r.Content, Reasoning: r.Reasoning,
		Truncated: r.Truncated, FinishReason: r.FinishReason, Seed: r.Seed, TopLogprobs: r.TopLogprobs,
		Logprobs: r.Logprobs, Generated: r.Generated, Error: r.Error,
	}
}

// WriteReference writes ref and its replies to dir/reference.json, refusing
// to write more than MaxReference bytes: the file could not be read back.
func WriteReference(dir string, ref *Reference) error {
	// Compact: a token with its top alternatives is a few objects, and
	// indenting them takes a third more bytes.
	b, err := json.Marshal(referenceFile{Schema: Schema, Reference: ref, Replies: ref.Replies})
	if err != nil {
		return err
	}
	if len(b)+1 > MaxReference {
		return fmt.Errorf("the reference's replies come to %d bytes in %s, more than the %d a run's file may be; record the reference with fewer --max-replies or --max-tokens", len(b)+1, ReferenceFile, MaxReference)
	}
	return writeAtomic(filepath.Join(dir, ReferenceFile), append(b, '\n'))
}

// ReadReference reads dir/reference.json as a run's file (ReadBounded: a
// link, a FIFO or a file past MaxFile is refused); nil, nil when there is
// none (a run without a reference, or made before references were kept).
func ReadReference(dir string) (*Reference, error) {
	path := filepath.Join(dir, ReferenceFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	b, err := ReadBounded(path)
	if err != nil {
		return nil, err
	}
	if n := countReplies(b); n > MaxReplies {
		return nil, tooManyReplies(path, n, MaxReplies)
	}
	var f referenceFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: not a reference file (%v)", path, err)
	}
	if f.Schema != Schema || f.Reference == nil {
		return nil, fmt.Errorf("%s: schema %q, want %q; it was written by another tool or version", path, f.Schema, Schema)
	}
	f.Reference.Replies = f.Replies
	return f.Reference, nil
}
