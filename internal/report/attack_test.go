package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadTooManyReplies: a hand-made out directory cannot make its reader
// decode millions of replies from a file within MaxFile ("{}" is 3 bytes, a
// decoded reply about 1 KB: 16 MiB of them took over 5 GB), nor from as many
// reply_N.json files.
func TestReadTooManyReplies(t *testing.T) {
	empties := "[" + strings.Repeat("{},", MaxReplies) + "{}]"
	want := fmt.Sprintf("holds %d replies, more than the %d a run's files may", MaxReplies+1, MaxReplies)

	dir := t.TempDir()
	write(t, filepath.Join(dir, ResultFile), `{"schema":"`+Schema+`","replies":`+empties+`}`)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Read of a result.json with %d replies: %v; want %q", MaxReplies+1, err, want)
	}
	if _, err := ReadFile(filepath.Join(dir, ResultFile)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ReadFile of a result.json with %d replies: %v; want %q", MaxReplies+1, err, want)
	}

	// reference.json is read only as result.json's digest names it.
	dir = t.TempDir()
	ref := `{"schema":"` + Schema + `","reference":{},"replies":` + empties + `}`
	write(t, filepath.Join(dir, ResultFile), `{"schema":"`+Schema+`","reference":{"file":"x","sha256":"`+digest([]byte(ref))+`"}}`)
	write(t, filepath.Join(dir, ReferenceFile), ref)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Read of a reference.json with %d replies: %v; want %q", MaxReplies+1, err, want)
	}

	// Reply files: counted before any is read (readReplies with a bound of
	// 3; Read passes MaxReplies).
	dir = t.TempDir()
	for n := 1; n <= 4; n++ {
		write(t, filepath.Join(dir, fmt.Sprintf("reply_%d.json", n)), "not read")
	}
	if _, err := readReplies(dir, 3); err == nil || !strings.Contains(err.Error(), "holds 4 replies, more than the 3") {
		t.Errorf("readReplies of a directory with 4 reply files, bound 3: %v; want them refused unread", err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
