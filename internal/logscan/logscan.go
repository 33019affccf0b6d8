// Package logscan reads a serve's log as a terminal would show it, as a
// stream: escape sequences are dropped, a carriage return breaks the line, a
// line of any length is matched in overlapping windows. It feeds the route
// matcher and keeps the last lines for the report, in bounded memory.
package logscan

import (
	"bytes"
	"io"
	"os"
	"unicode"
	"unicode/utf8"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// TailLines is how many of the log's last lines a report keeps, and
// TailLineMax how many bytes of each.
const (
	TailLines   = 40
	TailLineMax = 1000
)

// Result is what one pass over a log gives.
type Result struct {
	Route route.Evidence
	// Tail is the last TailLines lines as the serve wrote them (escape
	// sequences kept, for the report to show escaped), each cut to
	// TailLineMax bytes.
	Tail  []string
	Bytes int64
}

// The states of the escape-sequence reader (ECMA-48, as terminals read it).
const (
	ground    = iota
	esc       // after ESC
	escInter  // ESC and intermediate bytes: charset designations (ESC ( B), ESC # 8
	csi       // ESC [ parameters, intermediates, final byte
	str       // OSC, DCS, SOS, PM, APC: up to BEL or ESC \
	strEsc    // ESC inside a string: \ ends it
	afterCR   // a carriage return just ended a segment: a line feed now ends only the line
	numStates // not a state
)

// Scanner reads a log written to it in pieces of any size, as a terminal
// shows it:
//   - CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC strings (ended by BEL or
//     ESC \, or by a line break, so a string left open does not hide the
//     rest of the log), ESC with intermediates (charsets) and single ESC x
//     are dropped, as are other control characters; a backspace removes the
//     character before it;
//   - a carriage return ends a segment (a progress bar's step), and so does
//     a line feed; lines are numbered by line feeds, as an editor numbers
//     them;
//   - invisible format characters (Unicode Cf: U+200B, U+00AD, ...) are
//     dropped;
//   - a segment longer than route.MaxLine is matched in windows of MaxLine
//     bytes, each starting route.Overlap bytes before the last one ended.
//
// 8-bit C1 controls are not read as escapes: in UTF-8 text those bytes are
// parts of characters.
type Scanner struct {
	m       *route.Matcher
	state   int
	line    int    // the line being read, 1-based
	seg     []byte // the current segment's window
	start   bool   // seg starts its segment
	head    []byte // the first TailLineMax bytes of a segment longer than a window
	shown   ring   // the last segments as a terminal shows them
	raw     ring   // the last lines as written
	rawLine []byte // the line being written, up to TailLineMax bytes
	rawOpen bool   // a line has begun and not ended
	bytes   int64
	pending bool   // a segment has begun (text or not) and is not yet ended
	part    []byte // a character cut at the end of a write
}

// ring keeps the last TailLines lines, each cut to TailLineMax bytes, in
// buffers reused line after line.
type ring struct {
	lines      [TailLines][]byte
	kept, next int
}

func (r *ring) add(line []byte) {
	r.lines[r.next] = append(r.lines[r.next][:0], line[:min(len(line), TailLineMax)]...)
	r.next = (r.next + 1) % TailLines
	r.kept = min(r.kept+1, TailLines)
}

func (r *ring) all() []string {
	var out []string
	for i := range r.kept {
		out = append(out, string(r.lines[(r.next-r.kept+i+TailLines)%TailLines]))
	}
	return out
}

// NewScanner reads a log for m.
func NewScanner(m *route.Matcher) *Scanner {
	return &Scanner{m: m, line: 1, start: true, seg: make([]byte, 0, route.MaxLine)}
}

// class of each byte in the ground state: 0 text, 1 to be looked at.
var special = func() (t [256]bool) {
	for b := range 0x20 {
		t[b] = true
	}
	t[0x7f] = true
	t['\t'] = false
	return t
}()

// Write reads p; it never fails.
func (s *Scanner) Write(p []byte) (int, error) {
	s.bytes += int64(len(p))
	s.rawLines(p)
	i := 0
	for i < len(p) {
		if s.state == ground {
			j := i
			for j < len(p) && !special[p[j]] {
				j++
			}
			if j > i {
				s.text(p[i:j])
				i = j
				continue
			}
		}
		s.control(p[i])
		i++
	}
	return len(p), nil
}

// rawLines keeps the lines of p as written, for the tail.
func (s *Scanner) rawLines(p []byte) {
	for len(p) > 0 {
		s.rawOpen = true
		j := bytes.IndexByte(p, '\n')
		part := p
		if j >= 0 {
			part = p[:j]
		}
		if room := TailLineMax - len(s.rawLine); room > 0 {
			s.rawLine = append(s.rawLine, part[:min(room, len(part))]...)
		}
		if j < 0 {
			return
		}
		s.raw.add(bytes.TrimRight(s.rawLine, "\r"))
		s.rawLine, s.rawOpen = s.rawLine[:0], false
		p = p[j+1:]
	}
}

// control reads one byte outside a run of text.
func (s *Scanner) control(b byte) {
	s.flushPart()
	switch s.state {
	case ground, afterCR:
		was := s.state
		s.state = ground
		switch {
		case b == '\n':
			if was != afterCR {
				s.endSegment()
			}
			s.line++
		case b == '\r':
			s.endSegment()
			s.state = afterCR
		case b == 0x1b:
			s.pending = true
			s.state = esc
		case b == '\b':
			s.backspace()
		case special[b]:
			s.pending = true // other controls are not shown
		default:
			s.text([]byte{b})
		}
	case esc:
		switch {
		case b == '[':
			s.state = csi
		case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
			s.state = str
		case b >= 0x20 && b <= 0x2f:
			s.state = escInter
		case b >= 0x30 && b <= 0x7e:
			s.state = ground
		default:
			s.abort(b)
		}
	case escInter:
		switch {
		case b >= 0x20 && b <= 0x2f:
		case b >= 0x30 && b <= 0x7e:
			s.state = ground
		default:
			s.abort(b)
		}
	case csi:
		switch {
		case b >= 0x20 && b <= 0x3f:
		case b >= 0x40 && b <= 0x7e:
			s.state = ground
		default:
			s.abort(b)
		}
	case str:
		switch b {
		case 0x07:
			s.state = ground
		case 0x1b:
			s.state = strEsc
		case '\n', '\r':
			s.abort(b)
		}
	case strEsc:
		if b == '\\' {
			s.state = ground
			return
		}
		s.state = esc
		s.control(b)
	}
}

// abort ends an escape sequence that a byte does not belong to, and reads
// the byte as a terminal would: a line break breaks the line, ESC starts a
// new sequence, another control is dropped, text is text.
func (s *Scanner) abort(b byte) {
	s.state = ground
	switch {
	case b == 0x1b:
		s.state = esc
	case special[b]:
		s.control(b)
	default:
		s.text([]byte{b})
	}
}

// text appends shown text to the segment, without the invisible format
// characters (Unicode Cf: zero-width space, soft hyphen, bidi controls,
// ...), which a terminal shows as nothing. A character cut between two
// writes is held until the next.
func (s *Scanner) text(p []byte) {
	s.pending = true
	if len(s.part) > 0 {
		p = append(s.part[:len(s.part):len(s.part)], p...)
		s.part = s.part[:0]
	}
	j := 0
	for j < len(p) {
		if p[j] < utf8.RuneSelf {
			j++
			continue
		}
		if !utf8.FullRune(p[j:]) {
			s.part = append(s.part, p[j:]...)
			p = p[:j]
			break
		}
		r, n := utf8.DecodeRune(p[j:])
		if unicode.Is(unicode.Cf, r) {
			s.shownText(p[:j])
			p, j = p[j+n:], 0
			continue
		}
		j += n
	}
	s.shownText(p)
}

// flushPart ends a character left cut by a control or the end of the log:
// it is shown as it is.
func (s *Scanner) flushPart() {
	if len(s.part) > 0 {
		s.shownText(s.part)
		s.part = s.part[:0]
	}
}

// shownText appends text to the segment, matching each full window.
func (s *Scanner) shownText(p []byte) {
	for len(p) > 0 {
		room := route.MaxLine - len(s.seg)
		if room == 0 {
			s.window()
			continue
		}
		n := min(room, len(p))
		s.seg = append(s.seg, p[:n]...)
		p = p[n:]
	}
}

// window matches a full window of a long segment and keeps its last
// route.Overlap bytes to start the next one.
func (s *Scanner) window() {
	if s.start {
		s.head = append(s.head[:0], s.seg[:TailLineMax]...)
	}
	s.m.Segment(s.line, s.seg, s.start, false)
	n := copy(s.seg, s.seg[len(s.seg)-route.Overlap:])
	s.seg = s.seg[:n]
	s.start = false
}

func (s *Scanner) backspace() {
	if len(s.seg) == 0 {
		return
	}
	_, n := utf8.DecodeLastRune(s.seg)
	s.seg = s.seg[:len(s.seg)-n]
}

// endSegment matches the segment's last window and keeps it for the tail.
func (s *Scanner) endSegment() {
	s.m.Segment(s.line, s.seg, s.start, true)
	keep := s.seg
	if !s.start {
		keep = s.head
	}
	s.shown.add(keep)
	s.seg, s.start, s.pending = s.seg[:0], true, false
}

// Result ends the log (a last line without a line break counts) and says
// what it held.
func (s *Scanner) Result() Result {
	s.flushPart()
	if s.pending || len(s.seg) > 0 {
		s.endSegment()
	}
	if s.rawOpen {
		s.raw.add(bytes.TrimRight(s.rawLine, "\r"))
		s.rawLine, s.rawOpen = s.rawLine[:0], false
	}
	s.state = ground
	return Result{Route: s.m.Evidence(), Bytes: s.bytes, Tail: s.raw.all()}
}

// Scan reads r to its end.
func Scan(r io.Reader, m *route.Matcher) (Result, error) {
	s := NewScanner(m)
	buf := make([]byte, 64<<10)
	_, err := io.CopyBuffer(s, onlyReader{r}, buf)
	return s.Result(), err
}

// onlyReader hides a reader's WriteTo, so io.CopyBuffer uses the buffer.
type onlyReader struct{ io.Reader }

// ScanFile is Scan of the file at path.
func ScanFile(path string, m *route.Matcher) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{Route: m.Evidence()}, err
	}
	defer f.Close()
	return Scan(f, m)
}
