package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
	// SHA256 is the digest of out/reference.json as the run wrote it
	// (WriteReference; the file itself holds none): Read takes the replies
	// back only from that file.
	SHA256 string `json:"sha256,omitempty"`
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
// to write more than MaxReference bytes: the file could not be read back. It
// sets ref.SHA256 to the digest of the file written, for result.json: the
// gate writes it once the run is over, before result.json.
func WriteReference(dir string, ref *Reference) error {
	return writeReference(ref, func(b []byte) error { return writeAtomic(filepath.Join(dir, ReferenceFile), b) })
}

// WriteReferenceIn is WriteReference into a directory the run holds open:
// the file is created there by name, never through a symlink.
func WriteReferenceIn(dir *os.Root, ref *Reference) error {
	return writeReference(ref, func(b []byte) error { return writeAtomicIn(dir, ReferenceFile, b) })
}

func writeReference(ref *Reference, write func([]byte) error) error {
	file := *ref
	file.SHA256 = ""
	// Compact: a token with its top alternatives is a few objects, and
	// indenting them takes a third more bytes.
	b, err := json.Marshal(referenceFile{Schema: Schema, Reference: &file, Replies: ref.Replies})
	if err != nil {
		return err
	}
	if len(b)+1 > MaxReference {
		return fmt.Errorf("the reference's replies come to %d bytes in %s, more than the %d a run's file may be; record the reference with fewer --max-replies or --max-tokens", len(b)+1, ReferenceFile, MaxReference)
	}
	b = append(b, '\n')
	if err := write(b); err != nil {
		return err
	}
	ref.SHA256 = digest(b)
	return nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// readReference reads the replies of the reference named by named (the
// reference of result.json) from dir/reference.json, as a run's file
// (ReadBounded: a link, a FIFO or a file past MaxFile is an error). The file
// is taken only when its digest is named.SHA256: a file missing, changed
// since the run wrote it, or of a run made before the digest was kept,
// leaves the reference without replies, and its File says why (the
// agreement then fails, naming it).
func readReference(dir string, named *Reference, u *budget) (*Reference, error) {
	path := filepath.Join(dir, ReferenceFile)
	without := func(why string) *Reference {
		ref := *named
		ref.Replies = nil
		ref.File += " (" + why + ": pass --reference again)"
		return &ref
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return without("its replies are not in " + ReferenceFile), nil
	}
	b, err := ReadBounded(path)
	if err != nil {
		return nil, err
	}
	switch got := digest(b); {
	case named.SHA256 == "":
		return without(fmt.Sprintf("%s records no digest of %s, so the file cannot be told to be the one this run compared with", ResultFile, ReferenceFile)), nil
	case got != named.SHA256:
		return without(fmt.Sprintf("%s is not the file this run compared with (sha256 %s..., not %s... as %s recorded)", ReferenceFile, got[:12], shortDigest(named.SHA256), ResultFile)), nil
	}
	if err := u.spend(path, b); err != nil {
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
	f.Reference.Replies, f.Reference.SHA256 = f.Replies, named.SHA256
	return f.Reference, nil
}

// shortDigest is the first 12 characters of a digest read from result.json,
// quoted when it is not one.
func shortDigest(s string) string {
	if len(s) == 64 && strings.Trim(s, "0123456789abcdef") == "" {
		return s[:12]
	}
	if len(s) > 12 {
		s = s[:12]
	}
	return strconv.Quote(s)
}
