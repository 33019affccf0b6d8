package probe

import (
	"bytes"
	"errors"
	"io"
)

// The event stream, as the WHATWG HTML standard's "interpreting an event
// stream" reads it: lines end with CR, LF or CRLF; a leading BOM is dropped;
// a line that starts with a colon is a comment; "field: value" loses one
// space after the colon, and a line without a colon is a field with an empty
// value; data lines are joined with LF, and a blank line dispatches the event.

const maxLine = 64 << 10

var (
	errLineTooLong = errors.New("a stream line ran past 64 KiB")
	bom            = []byte("\xEF\xBB\xBF")
)

// lineReader gives the stream's lines as soon as each one's end has come, so
// a line's arrival can be timed before it is parsed.
type lineReader struct {
	r          io.Reader
	buf        []byte
	start, end int
	skipLF     bool // the last line ended with CR: a LF next belongs to it
	bomChecked bool
	err        error
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: r, buf: make([]byte, maxLine)}
}

// next is the next line without its end. The slice is valid until the next
// call. At the stream's end it returns the reader's error (io.EOF); an
// unfinished last line is dropped, as the standard says.
func (l *lineReader) next() ([]byte, error) {
	for {
		if l.skipLF && l.start < l.end {
			if l.buf[l.start] == '\n' {
				l.start++
			}
			l.skipLF = false
		}
		if !l.bomChecked {
			rest := l.buf[l.start:l.end]
			if len(rest) >= len(bom) || !bytes.HasPrefix(bom, rest) || l.err != nil {
				if bytes.HasPrefix(rest, bom) {
					l.start += len(bom)
				}
				l.bomChecked = true
			}
		}
		if l.bomChecked {
			if line, ok := l.cut(); ok {
				return line, nil
			}
		}
		if l.err != nil {
			return nil, l.err
		}
		if l.start > 0 {
			l.end = copy(l.buf, l.buf[l.start:l.end])
			l.start = 0
		}
		if l.end == len(l.buf) {
			return nil, errLineTooLong
		}
		n, err := l.r.Read(l.buf[l.end:])
		l.end += n
		l.err = err
	}
}

// cut takes one whole line off the buffer, if there is one.
func (l *lineReader) cut() ([]byte, bool) {
	rest := l.buf[l.start:l.end]
	i := bytes.IndexByte(rest, '\n')
	search := rest
	if i >= 0 {
		search = rest[:i]
	}
	if j := bytes.IndexByte(search, '\r'); j >= 0 {
		i = j
		l.skipLF = true
	}
	if i < 0 {
		return nil, false
	}
	l.start += i + 1
	return rest[:i], true
}

// field splits a line into its field name and value.
func field(line []byte) (name, value []byte) {
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return line, nil
	}
	name, value = line[:i], line[i+1:]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return name, value
}

// event is what the fields of one event have said so far.
type event struct {
	typ     []byte
	data    []byte
	hasData bool
}

// take applies one line to the event. It reports true on a blank line: the
// event is then complete (dispatch it when hasData, then reset).
func (e *event) take(line []byte) (complete bool) {
	if len(line) == 0 {
		return true
	}
	if line[0] == ':' {
		return false
	}
	name, value := field(line)
	switch string(name) {
	case "data":
		if e.hasData {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, value...)
		e.hasData = true
	case "event":
		e.typ = append(e.typ[:0], value...)
	}
	// "id" and "retry" only matter to a client that reconnects, which the
	// probe never does; other fields are ignored, as the standard says.
	return false
}

func (e *event) reset() {
	e.typ, e.data, e.hasData = e.typ[:0], e.data[:0], false
}
