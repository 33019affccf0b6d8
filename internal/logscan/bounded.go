package logscan

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

// DefaultLimit is how much of a serve's log is kept on disk.
const DefaultLimit = 64 << 20

// MinLimit is the smallest limit: room for a head, a tail and the marker.
const MinLimit = 4 << 10

// Bounded writes a log to a file within a limit: the first half of the
// limit as it came, then the last bytes, in a ring beside it until Close
// puts them after the head with a marker saying how much was cut.
type Bounded struct {
	f, ring          *os.File
	path             string
	headMax, tailMax int64
	written          int64
	err              error // the first write error; writing goes on being accepted
}

// CreateBounded creates (or empties) the file at path.
func CreateBounded(path string, limit int64) (*Bounded, error) {
	if limit < MinLimit {
		return nil, fmt.Errorf("log limit %d bytes: pass at least %d", limit, MinLimit)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	// The marker takes a little room of its own.
	head := limit / 2
	return &Bounded{f: f, path: path, headMax: head, tailMax: limit - head - markerRoom}, nil
}

const markerRoom = 256

// Write keeps p's bytes that fall in the head or, for now, the tail. It
// never fails: a write error is kept for Close, so the serve's stream is
// read to its end whatever the disk does.
func (b *Bounded) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.headMax - b.written; room > 0 {
		k := int(min(room, int64(len(p))))
		b.keep(b.f.Write(p[:k]))
		b.written += int64(k)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if b.ring == nil && b.err == nil {
		ring, err := os.CreateTemp(filepath.Dir(b.path), "."+filepath.Base(b.path)+".tail-*")
		if err != nil {
			b.err = err
		}
		b.ring = ring
	}
	if b.ring == nil {
		b.written += int64(len(p))
		return n, nil
	}
	// Only the last tailMax bytes of p can stay.
	if skip := int64(len(p)) - b.tailMax; skip > 0 {
		b.written += skip
		p = p[skip:]
	}
	for len(p) > 0 {
		off := (b.written - b.headMax) % b.tailMax
		k := int(min(b.tailMax-off, int64(len(p))))
		b.keep(b.ring.WriteAt(p[:k], off))
		b.written += int64(k)
		p = p[k:]
	}
	return n, nil
}

func (b *Bounded) keep(_ int, err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// Cut says what a bounded log kept.
type Cut struct {
	Written int64 // bytes the serve wrote
	Dropped int64 // bytes left out of the file, where the marker is
}

// Close puts the tail after the head, with a marker when bytes were left
// out, and closes the file.
func (b *Bounded) Close() (Cut, error) {
	c := Cut{Written: b.written}
	if b.ring == nil && b.written > b.headMax {
		c.Dropped = b.written - b.headMax // the ring could not be made: b.err says why
	}
	if b.ring != nil {
		tail := b.written - b.headMax
		start := int64(0)
		if tail > b.tailMax {
			c.Dropped = tail - b.tailMax
			start = tail % b.tailMax
			fmt.Fprintf(b.f, "\n[npu-serve-smoke: %d bytes cut here; serve.log keeps the first %d and the last %d of the %d bytes the serve wrote (--log-limit); the route was read on the whole stream]\n",
				c.Dropped, b.headMax, b.tailMax, b.written)
			tail = b.tailMax
		}
		// In order: from start to the end of what was written, then from
		// the ring's beginning.
		first := min(tail, b.tailMax) - start
		_, err := io.Copy(b.f, io.NewSectionReader(b.ring, start, first))
		b.keep(0, err)
		_, err = io.Copy(b.f, io.NewSectionReader(b.ring, 0, start))
		b.keep(0, err)
		b.ring.Close()
		os.Remove(b.ring.Name())
	}
	b.keep(0, b.f.Close())
	return c, b.err
}

// Capture reads a serve's output as it is written: every byte is scanned
// for route evidence, and the file keeps its head and tail within a limit.
type Capture struct {
	r    *os.File
	scan *Scanner
	file *Bounded
	done chan struct{}
	err  error
}

// Captured is what a capture found.
type Captured struct {
	Result
	Cut
}

// NewCapture creates the log file at path and a pipe into it. The serve is
// given w as its stdout and stderr; the caller closes its own copy of w
// once the serve has started, so the capture ends when the serve's last
// process closes it.
func NewCapture(path string, limit int64, m *judge.RouteMatcher) (c *Capture, w *os.File, err error) {
	file, err := CreateBounded(path, limit)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		file.Close()
		return nil, nil, err
	}
	c = &Capture{r: r, scan: NewScanner(m), file: file, done: make(chan struct{})}
	go c.copy()
	return c, w, nil
}

func (c *Capture) copy() {
	defer close(c.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := c.r.Read(buf)
		c.scan.Write(buf[:n])
		c.file.Write(buf[:n])
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.err = err
			}
			return
		}
	}
}

// drain reads what is left in the pipe without waiting for more.
func (c *Capture) drain() {
	rc, err := c.r.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return true
			}
			c.scan.Write(buf[:n])
			c.file.Write(buf[:n])
		}
	})
}

// Wait waits for the end of the serve's output, at most within (a process
// that escaped the stop may hold the pipe open: what it wrote so far is
// kept), then finishes the file.
func (c *Capture) Wait(within time.Duration) (Captured, error) {
	t := time.NewTimer(within)
	select {
	case <-c.done:
		t.Stop()
	case <-t.C:
		c.r.SetReadDeadline(time.Now())
		<-c.done
		c.drain()
	}
	c.r.Close()
	cut, err := c.file.Close()
	return Captured{Result: c.scan.Result(), Cut: cut}, errors.Join(c.err, err)
}
