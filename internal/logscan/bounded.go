package logscan

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
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
	root             *os.Root // when set, the ring is made in it, by name, and removed there
	name             string   // the file's name in root
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

// CreateBoundedIn creates the file name in dir, which must not exist: it
// is created there, never reached through a symlink (O_EXCL refuses any
// file, link or not, already at name), and so is the ring beside it. dir
// is a directory opened once: what its path leads to later is not written.
func CreateBoundedIn(dir *os.Root, name string, limit int64) (*Bounded, error) {
	if limit < MinLimit {
		return nil, fmt.Errorf("log limit %d bytes: pass at least %d", limit, MinLimit)
	}
	f, err := dir.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, 0o644)
	if err != nil {
		return nil, err
	}
	head := limit / 2
	return &Bounded{f: f, path: filepath.Join(dir.Name(), name), root: dir, name: name, headMax: head, tailMax: limit - head - markerRoom}, nil
}

// createRing makes the ring beside the file: by name in its root when it
// has one, else in its directory.
func (b *Bounded) createRing() (*os.File, error) {
	if b.root == nil {
		return os.CreateTemp(filepath.Dir(b.path), "."+filepath.Base(b.path)+".tail-*")
	}
	for range 100 {
		name := "." + b.name + ".tail-" + randomWord()
		f, err := b.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR|noFollow, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("no free name for %s's tail in %s", b.name, b.root.Name())
}

// removeRing removes the ring, where it was made.
func (b *Bounded) removeRing() {
	if b.root == nil {
		os.Remove(b.ring.Name())
		return
	}
	b.root.Remove(filepath.Base(b.ring.Name()))
}

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
		ring, err := b.createRing()
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
		b.removeRing()
	}
	b.keep(0, b.f.Close())
	return c, b.err
}

// Capture reads a serve's output as it is written: every byte is scanned
// for route evidence, and the file keeps its head and tail within a limit.
// stdout and stderr come through pipes of their own, each read as a stream
// of lines, and go to the scan and the file a whole line at a time: a line
// one stream writes in pieces is never cut by a line of the other (as a
// terminal given two line-buffered streams shows them).
type Capture struct {
	mu      sync.Mutex
	scan    *Scanner
	file    *Bounded
	streams [2]*stream
	owner   *stream // the stream whose line is written in part, or nil
}

// A stream is one of the serve's outputs: what of its current line it has
// not yet written.
type stream struct {
	r    *os.File
	c    *Capture
	pend []byte
	done chan struct{}
	err  error
	// stopped is set when Wait stops waiting: the read it ends is no
	// error.
	stopped atomic.Bool
}

// Past MaxPart bytes, a stream's line is written in part (a progress bar
// without line breaks, a line of any length): the other stream then holds
// its lines until that line ends, up to MaxHeld bytes, past which they go
// in between. Memory stays bounded whatever the serve prints.
const (
	MaxPart = route.MaxLine
	MaxHeld = 1 << 20
)

// Captured is what a capture found.
type Captured struct {
	Result
	Cut
}

// NewCapture creates the log file at path and a pipe into it for each of
// the serve's stdout and stderr. The caller closes its own copies of them
// once the serve has started, so the capture ends when the serve's last
// process closes them.
func NewCapture(path string, limit int64, m *route.Matcher) (c *Capture, stdout, stderr *os.File, err error) {
	file, err := CreateBounded(path, limit)
	if err != nil {
		return nil, nil, nil, err
	}
	return newCapture(file, m)
}

// NewCaptureIn is NewCapture of the file name in dir (CreateBoundedIn).
func NewCaptureIn(dir *os.Root, name string, limit int64, m *route.Matcher) (c *Capture, stdout, stderr *os.File, err error) {
	file, err := CreateBoundedIn(dir, name, limit)
	if err != nil {
		return nil, nil, nil, err
	}
	return newCapture(file, m)
}

func newCapture(file *Bounded, m *route.Matcher) (c *Capture, stdout, stderr *os.File, err error) {
	c = &Capture{scan: NewScanner(m), file: file}
	var w [2]*os.File
	for i := range c.streams {
		r, pw, err := os.Pipe()
		if err != nil {
			file.Close()
			for j := range i {
				c.streams[j].r.Close()
				w[j].Close()
			}
			return nil, nil, nil, err
		}
		c.streams[i], w[i] = &stream{r: r, c: c, done: make(chan struct{})}, pw
	}
	for _, s := range c.streams {
		go s.copy()
	}
	return c, w[0], w[1], nil
}

func (s *stream) copy() {
	defer close(s.done)
	buf := make([]byte, 64<<10)
	for !s.stopped.Load() {
		n, err := s.r.Read(buf)
		s.c.add(s, buf[:n])
		if err != nil {
			if !errors.Is(err, io.EOF) && !s.stopped.Load() {
				s.err = err
			}
			return
		}
	}
}

// drain reads what is left in the pipe without waiting for more.
func (s *stream) drain() {
	readWaiting(s.r, func(p []byte) { s.c.add(s, p) })
}

// add takes bytes a stream read and writes what of them can be written.
func (c *Capture) add(s *stream, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.pend = append(s.pend, p...)
	c.flush(s)
}

// flush writes a stream's whole lines, unless the other stream's line is
// written in part (then up to MaxHeld bytes wait), and the rest of a line
// longer than MaxPart. When a line written in part ends, the other
// stream's held lines follow it.
func (c *Capture) flush(s *stream) {
	other := c.other(s)
	if c.owner == other && len(s.pend) < MaxHeld {
		return
	}
	n := bytes.LastIndexByte(s.pend, '\n') + 1
	if n == 0 && c.owner == s || len(s.pend)-n >= MaxPart {
		n = len(s.pend)
	}
	if n == 0 {
		return
	}
	c.write(s.pend[:n])
	if s.pend[n-1] != '\n' {
		c.owner = s
	} else if c.owner == s {
		c.owner = nil
	}
	s.pend = s.pend[:copy(s.pend, s.pend[n:])]
	if c.owner == nil {
		c.flush(other)
	}
}

func (c *Capture) other(s *stream) *stream {
	if s == c.streams[0] {
		return c.streams[1]
	}
	return c.streams[0]
}

func (c *Capture) write(p []byte) {
	c.scan.Write(p)
	c.file.Write(p)
}

// finish writes what the streams left unwritten at their end: the line
// written in part first, each stream's last line ended by a line feed when
// the other's follows it.
func (c *Capture) finish() {
	first, second := c.streams[0], c.streams[1]
	if c.owner == second {
		first, second = second, first
	}
	c.write(first.pend)
	if n := len(first.pend); n > 0 && first.pend[n-1] != '\n' && len(second.pend) > 0 {
		c.write([]byte{'\n'})
	}
	c.write(second.pend)
	first.pend, second.pend, c.owner = nil, nil, nil
}

// Wait waits for the end of the serve's output, at most within (a process
// that escaped the stop may hold a pipe open: what it wrote so far is
// kept), then finishes the file.
func (c *Capture) Wait(within time.Duration) (Captured, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	expired := false
	for _, s := range c.streams {
		if !expired {
			select {
			case <-s.done:
				continue
			case <-t.C:
				expired = true
				for _, s := range c.streams {
					s.stopped.Store(true)
					go stopReading(s.r, s.done)
				}
			}
		}
		<-s.done
	}
	var errs []error
	for _, s := range c.streams {
		s.drain()
		s.r.Close()
		errs = append(errs, s.err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finish()
	cut, err := c.file.Close()
	return Captured{Result: c.scan.Result(), Cut: cut}, errors.Join(append(errs, err)...)
}

// randomWord is 16 hex digits from crypto/rand.
func randomWord() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
