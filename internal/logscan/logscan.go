// Package logscan reads a serve's log as a stream: it feeds each line to the
// route matcher and keeps the last lines for the report, so a log of any size
// is read in bounded memory.
package logscan

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

// TailLines is how many of the log's last lines a report keeps, and
// TailLineMax how many bytes of each.
const (
	TailLines   = 40
	TailLineMax = 1000
)

// Result is what one pass over a log gives.
type Result struct {
	Route judge.Evidence
	Tail  []string // the last TailLines lines, each cut to TailLineMax bytes
	Bytes int64
}

// Scan reads r to its end. Lines longer than judge.MaxLine are matched on
// their first judge.MaxLine bytes and the rest is skipped.
func Scan(r io.Reader, m *judge.RouteMatcher) (Result, error) {
	br := bufio.NewReaderSize(r, judge.MaxLine)
	var res Result
	// The tail is a ring of buffers reused line after line, so the steady
	// state allocates nothing.
	var ring [TailLines][]byte
	kept, next := 0, 0
	skipping := false
	for {
		chunk, err := br.ReadSlice('\n')
		res.Bytes += int64(len(chunk))
		if len(chunk) > 0 && !skipping {
			line := bytes.TrimRight(chunk, "\r\n")
			m.Line(line)
			if len(line) > TailLineMax {
				line = line[:TailLineMax]
			}
			ring[next] = append(ring[next][:0], line...)
			next = (next + 1) % TailLines
			kept = min(kept+1, TailLines)
		}
		// A line longer than the buffer: what is left of it is skipped.
		skipping = errors.Is(err, bufio.ErrBufferFull)
		if skipping {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
	}
	res.Route = m.Evidence()
	for i := range kept {
		res.Tail = append(res.Tail, string(ring[(next-kept+i+TailLines)%TailLines]))
	}
	return res, nil
}

// ScanFile is Scan of the file at path.
func ScanFile(path string, m *judge.RouteMatcher) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{Route: m.Evidence()}, err
	}
	defer f.Close()
	return Scan(f, m)
}
