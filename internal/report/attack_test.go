package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// TestReadTooManyReplies: a hand-made out directory cannot make its reader
// decode millions of replies from a file within MaxFile ("{}" is 3 bytes, a
// decoded reply about 1 KB: 16 MiB of them took over 5 GB), nor from as many
// reply_N.json files.
func TestReadTooManyReplies(t *testing.T) {
	empties := "[" + strings.Repeat("{},", MaxReplies) + "{}]"
	want := fmt.Sprintf("holds %d replies, more than the %d a run's files may", MaxReplies+1, MaxReplies)

	dir := wintest.TempDir(t)
	write(t, filepath.Join(dir, ResultFile), `{"schema":"`+Schema+`","replies":`+empties+`}`)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Read of a result.json with %d replies: %v; want %q", MaxReplies+1, err, want)
	}
	if _, err := ReadFile(filepath.Join(dir, ResultFile)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ReadFile of a result.json with %d replies: %v; want %q", MaxReplies+1, err, want)
	}

	// reference.json is read only as result.json's digest names it.
	dir = wintest.TempDir(t)
	ref := `{"schema":"` + Schema + `","reference":{},"replies":` + empties + `}`
	write(t, filepath.Join(dir, ResultFile), `{"schema":"`+Schema+`","reference":{"file":"x","sha256":"`+digest([]byte(ref))+`"}}`)
	write(t, filepath.Join(dir, ReferenceFile), ref)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Read of a reference.json with %d replies: %v; want %q", MaxReplies+1, err, want)
	}

	// Reply files: counted before any is read (readReplies with a bound of
	// 3; Read passes MaxReplies).
	dir = wintest.TempDir(t)
	for n := 1; n <= 4; n++ {
		write(t, filepath.Join(dir, fmt.Sprintf("reply_%d.json", n)), "not read")
	}
	if _, err := readReplies(dir, 3, nil); err == nil || !strings.Contains(err.Error(), "holds 4 replies, more than the 3") {
		t.Errorf("readReplies of a directory with 4 reply files, bound 3: %v; want them refused unread", err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadRunBounds: each file under MaxFile is not enough: ten reply files
// of just under 16 MiB took 1.8 GB and 21 s to re-judge. The files a run's
// directory is read from (result.json, the reply files, reference.json) are
// bounded together, in bytes and in JSON objects, and a directory past
// either is refused naming the bound, before what is past it is decoded.
func TestReadRunBounds(t *testing.T) {
	reply := func(n, arrivals int) string {
		return fmt.Sprintf(`{"n":%d,"arrivals":[%s{}]}`, n, strings.Repeat("{},", arrivals-1))
	}
	text := func(n int, c string, size int) string {
		return fmt.Sprintf(`{"n":%d,"content":"%s"}`, n, strings.Repeat(c, size))
	}
	small := runBounds{bytes: 4000, objects: 1000}
	tests := []struct {
		name    string
		replies []string
		want    string
	}{
		{"within both", []string{reply(1, 300), reply(2, 300)}, ""},
		{"bytes", []string{text(1, "x", 1500), text(2, "x", 1500), text(3, "x", 1500)}, "come to more than the 4000 bytes a run's directory may hold (result.json, reply_N.json and reference.json together); it is not a directory the gate wrote, refused"},
		// A '{' in a string counts: the bound is cheap to count, and a
		// run's texts are a small part of its files.
		{"objects", []string{text(1, "{", 400), text(2, "{", 400), text(3, "{", 400)}, "hold more than the 1000 JSON objects a run's directory may (result.json, reply_N.json and reference.json together); it is not a directory the gate wrote, refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := wintest.TempDir(t)
			write(t, filepath.Join(dir, ResultFile), `{"schema":"`+Schema+`"}`)
			for i, r := range tt.replies {
				write(t, filepath.Join(dir, fmt.Sprintf("reply_%d.json", i+1)), r)
			}
			_, err := read(dir, small)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("read(%d replies) = %v, want them read", len(tt.replies), err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("read(%d replies) = %v, want %q", len(tt.replies), err, tt.want)
			}
		})
	}

	// The bounds Read itself applies: 4,000,001 objects in one reply file
	// of 12 MB, under MaxFile.
	dir := wintest.TempDir(t)
	write(t, filepath.Join(dir, ResultFile), `{"schema":"`+Schema+`"}`)
	write(t, filepath.Join(dir, "reply_1.json"), reply(1, MaxRunObjects))
	want := fmt.Sprintf("hold more than the %d JSON objects a run's directory may", MaxRunObjects)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Read of %d objects = %v, want %q", MaxRunObjects+1, err, want)
	}
	// And a result.json read alone (a baseline) is bounded the same way.
	write(t, filepath.Join(dir, ResultFile), `{"schema":"`+Schema+`","replies":[`+reply(1, MaxRunObjects)+`]}`)
	if _, err := ReadFile(filepath.Join(dir, ResultFile)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than the %d JSON objects", MaxRunObjects)) {
		t.Errorf("ReadFile of %d objects = %v, want it refused", MaxRunObjects+1, err)
	}
}
