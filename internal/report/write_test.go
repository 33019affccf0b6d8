package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// TestWriteResultKeepsTokensInReplyFiles: result.json holds no tokens, the
// reply files do, and reading the directory gives them back: a recording of
// long replies stays within what its readers take.
func TestWriteResultKeepsTokensInReplyFiles(t *testing.T) {
	dir := wintest.TempDir(t)
	r := sample()
	r.Replies = r.Replies[:1]
	rep := &r.Replies[0]
	rep.Logprobs = measure.LogprobsSent
	// 2048 tokens with 5 alternatives each: about 1.4 MB of JSON a reply.
	for range 2048 {
		tok := measure.Token{Text: " word", Logprob: -0.1}
		for range 5 {
			tok.Top = append(tok.Top, measure.Alt{Text: " words", Logprob: -2.5})
		}
		rep.Generated = append(rep.Generated, tok)
	}
	r.Warmups = []measure.Reply{*rep}
	r.Warmups[0].Warmup = true
	if err := WriteReply(filepath.Join(dir, ReplyFile(rep)), rep); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"generated"`) {
		t.Errorf("result.json holds tokens (%d bytes); want them in the reply files only", len(b))
	}
	if len(r.Replies[0].Generated) != 2048 || len(r.Warmups[0].Generated) != 2048 {
		t.Errorf("Write changed the result's own replies: %d and %d tokens left", len(r.Replies[0].Generated), len(r.Warmups[0].Generated))
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Replies[0].Generated); n != 2048 {
		t.Errorf("Read(dir) reply 1 holds %d tokens, want 2048 from reply_1.json", n)
	}
}

// TestWriteReplyBounded: a reply whose tokens would take its file past
// MaxFile keeps none, and says so; the reply itself is then what was
// written, so the run judges what its file holds.
func TestWriteReplyBounded(t *testing.T) {
	dir := wintest.TempDir(t)
	rep := measure.Reply{N: 1, Content: "x", Logprobs: measure.LogprobsSent}
	big := strings.Repeat("\x01", 256) // 6 bytes each in JSON
	for range MaxFile / (21 * 256 * 6) {
		tok := measure.Token{Text: big}
		for range 20 {
			tok.Top = append(tok.Top, measure.Alt{Text: big})
		}
		rep.Generated = append(rep.Generated, tok)
	}
	rep.Generated = append(rep.Generated, rep.Generated[:10]...)
	path := filepath.Join(dir, "reply_1.json")
	if err := WriteReply(path, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Generated != nil || rep.Logprobs != measure.LogprobsGarbage || !strings.Contains(rep.LogprobsDetail, "past the 16777216 a run's file may be: none kept") {
		t.Errorf("WriteReply(past MaxFile) left %d tokens, logprobs %q (%s); want none, garbage, saying why", len(rep.Generated), rep.Logprobs, rep.LogprobsDetail)
	}
	if _, err := ReadBounded(path); err != nil {
		t.Errorf("ReadBounded(the reply file written) = %v; the gate must read what it writes", err)
	}
	// Just within: kept as it is.
	small := measure.Reply{N: 2, Content: "x", Logprobs: measure.LogprobsSent, Generated: []measure.Token{{Text: "x"}}}
	if err := WriteReply(filepath.Join(dir, "reply_2.json"), &small); err != nil || small.Logprobs != measure.LogprobsSent || len(small.Generated) != 1 {
		t.Errorf("WriteReply(small) = %v, logprobs %q, %d tokens; want it kept", err, small.Logprobs, len(small.Generated))
	}
	// Content alone past the bound: not written.
	huge := measure.Reply{N: 3, Content: strings.Repeat("\x01", MaxFile/6+1)}
	if err := WriteReply(filepath.Join(dir, "reply_3.json"), &huge); err == nil {
		t.Errorf("WriteReply(content past MaxFile) = nil, want an error")
	}
}

// TestWriteResultBounded: a result.json past MaxFile is not written: its
// readers would refuse it.
func TestWriteResultBounded(t *testing.T) {
	r := sample()
	r.Replies[0].Content = strings.Repeat("\x01", MaxFile/6+1)
	path := filepath.Join(wintest.TempDir(t), ResultFile)
	if err := WriteResult(path, r); err == nil || !strings.Contains(err.Error(), "more than the 16777216 a run's file may be; ask fewer --max-replies") {
		t.Errorf("WriteResult(past MaxFile) = %v, want it refused", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("WriteResult(past MaxFile) wrote %s", path)
	}
}

// A file that cannot take its name (a directory is there) is not written,
// and leaves no temporary file behind, through the out directory or by path.
func TestWriteLeavesNoTemporaryFile(t *testing.T) {
	dir := wintest.TempDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "reply_2.json", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteFileIn(root, "reply_2.json", []byte("{}\n")); err == nil {
		t.Error("WriteFileIn over a directory: no error")
	}
	if err := WriteReply(filepath.Join(dir, "reply_2.json"), &measure.Reply{N: 2}); err == nil {
		t.Error("WriteReply over a directory: no error")
	}
	wintest.SkipOnWine(t, wintest.NoRootRemove)
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %q, want reply_2.json alone (no temporary file)", names)
	}
}
