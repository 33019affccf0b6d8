package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFile bounds each JSON file of a run that is read whole: result.json and
// every reply_N.json, the same bound the baseline zip puts on its entries.
const MaxFile = 16 << 20

// MaxReplies bounds the replies one file (result.json, reference.json) or one
// directory's reply_N.json files may hold: a reply a run writes takes a few
// hundred bytes of JSON at least, so MaxFile holds fewer, while "{}" takes 3
// and decodes to a reply of about 1 KB. Without the bound a 16 MiB file of
// empty replies takes over 5 GB to read.
const MaxReplies = 65536

// MaxRunBytes and MaxRunObjects bound a run's directory as a whole: the
// bytes of the JSON files read from it (result.json, every reply_N.json,
// reference.json) and the JSON objects in them (each '{', strings'
// included), as the history's extraction bounds an artifact. MaxFile alone
// let ten reply files of just under 16 MiB (170 KB zipped) take 1.8 GB and
// 21 s to re-judge. The gate writes a token as an object of its own, one
// for each top alternative (21 with --top-logprobs 20) and one for its
// arrival, about 90 bytes each, indented: 128 MiB hold 1.4 million of
// them, 63,000 tokens of top 20 (31 replies of 2048 tokens). Objects cost
// memory more than bytes (an empty token "{}" is 3 bytes, decoded 56): 2
// million of them are the most a directory of 128 MiB the gate wrote holds,
// with room to spare. (config refuses a run asked for more: checkRunSize.)
const (
	MaxRunBytes   = 128 << 20
	MaxRunObjects = 2_000_000
)

// runBounds is what is left to read of a run's directory.
type runBounds struct {
	bytes   int64
	objects int
}

// budget is a run directory's bounds, spent file by file.
type budget struct {
	left, max runBounds
}

func newBudget(b runBounds) *budget { return &budget{left: b, max: b} }

// spend takes the file at path, read as b, from what is left, before b is
// decoded: past either bound is an error naming it.
func (u *budget) spend(path string, b []byte) error {
	if u == nil {
		return nil
	}
	u.left.bytes -= int64(len(b))
	u.left.objects -= bytes.Count(b, []byte("{"))
	switch {
	case u.left.bytes < 0:
		return fmt.Errorf("%s: the files read with it come to more than the %d bytes a run's directory may hold (result.json, reply_N.json and reference.json together); it is not a directory the gate wrote, refused", path, u.max.bytes)
	case u.left.objects < 0:
		return fmt.Errorf("%s: the files read with it hold more than the %d JSON objects a run's directory may (result.json, reply_N.json and reference.json together); it is not a directory the gate wrote, refused", path, u.max.objects)
	}
	return nil
}

// countReplies is how many entries b's top-level "replies" array holds,
// read without decoding them (their elements take no memory).
func countReplies(b []byte) int {
	var c struct {
		Replies []struct{} `json:"replies"`
	}
	if json.Unmarshal(b, &c) != nil {
		return 0 // the real decode says what is wrong
	}
	return len(c.Replies)
}

// tooManyReplies is the error for a file (or directory) holding n replies,
// more than most (MaxReplies).
func tooManyReplies(path string, n, most int) error {
	return fmt.Errorf("%s holds %d replies, more than the %d a run's files may; it was not written by a run: pass the out directory of a finished run", path, n, most)
}

// Open opens a file of a run's directory for reading, without blocking and
// without following a link at its end, and refuses anything but a regular
// file: an artifact is untrusted, and a FIFO or a device there would hang or
// flood its reader.
func Open(path string) (*os.File, error) {
	return open(path, noFollow)
}

// open is Open with flags added to the open's (0: a link is followed).
func open(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flags, 0)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok && pe.Err == syscall.ELOOP {
			return nil, fmt.Errorf("%s is a symbolic link; a run's files are regular files, refused", path)
		}
		return nil, fmt.Errorf("%s: %v", path, unwrapPath(err))
	}
	if isLink(f) {
		f.Close()
		return nil, fmt.Errorf("%s is a symbolic link or a junction; a run's files are regular files, refused", path)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %v", path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%v); a run's files are regular files, refused", path, fi.Mode().Type())
	}
	return f, nil
}

// ReadBounded reads the regular file at path whole (Open), refusing one of
// more than MaxFile bytes before reading it.
func ReadBounded(path string) ([]byte, error) {
	return readBounded(path, noFollow)
}

func readBounded(path string, flags int) ([]byte, error) {
	f, err := open(path, flags)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, unwrapPath(err))
	}
	if fi.Size() > MaxFile {
		return nil, tooBig(path, fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, unwrapPath(err))
	}
	if len(b) > MaxFile {
		return nil, tooBig(path, int64(len(b)))
	}
	return b, nil
}

func tooBig(path string, size int64) error {
	return fmt.Errorf("%s is %d bytes, more than the %d a run's file may be; it is not a file the gate wrote, refused", path, size, MaxFile)
}
