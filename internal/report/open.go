package report

import (
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
	return open(path, syscall.O_NOFOLLOW)
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
	return readBounded(path, syscall.O_NOFOLLOW)
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
