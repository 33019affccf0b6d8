package console

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
)

// Commands is the runner's reading of workflow commands, as this process
// set it. nil means the process is not in GitHub Actions.
type Commands struct {
	mu    sync.Mutex
	token string // while the runner is told to stop reading them
}

// Stop tells the runner, on w, to stop reading workflow commands until the
// returned function is called, which tells it on w to resume. The token is
// random, so text from elsewhere cannot guess it to resume them. Outside
// GitHub Actions (c is nil) it does nothing.
func (c *Commands) Stop(w io.Writer) (resume func()) {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" {
		return func() {} // already stopped; the outer stop resumes
	}
	c.token = newToken()
	fmt.Fprintf(w, "::stop-commands::%s\n", c.token)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		fmt.Fprintf(w, "::%s::\n", c.token)
		c.token = ""
	}
}

// Stopped reports whether the runner has been told to stop reading workflow
// commands.
func (c *Commands) Stopped() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token != ""
}

func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "npu-serve-smoke-" + hex.EncodeToString(b)
}

// Printer prints lines to a console, each made safe by Text. In GitHub
// Actions (Commands not nil) a line printed while the runner still reads
// workflow commands gets a stop-commands of its own around it, on the same
// stream, so the runner reads the three in order.
type Printer struct {
	w    io.Writer
	cmds *Commands

	mu      sync.Mutex
	partial bool // the last write ended inside a line
}

// NewPrinter prints to w; cmds is nil outside GitHub Actions.
func NewPrinter(w io.Writer, cmds *Commands) *Printer {
	return &Printer{w: w, cmds: cmds}
}

// Printf prints one line: the formatted text, made safe whole by Text (a
// line break in an argument is shown as \n), and a line break.
func (p *Printer) Printf(format string, args ...any) {
	p.print([]byte(Text(fmt.Sprintf(format, args...)) + "\n"))
}

// Write prints b line by line, each line made safe by Text, keeping b's own
// line breaks: for text whose lines are the printer's to choose (usage,
// reports built a line at a time). Text from elsewhere goes through Printf.
func (p *Printer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	midLine := p.partial
	var out bytes.Buffer
	for rest := b; len(rest) > 0; {
		line, after, found := bytes.Cut(rest, []byte("\n"))
		if p.partial {
			// The rest of a line already begun: it cannot start a command,
			// but its controls and "##[" are escaped as everywhere.
			out.WriteString(Text("x" + string(line))[1:])
		} else {
			out.WriteString(Text(string(line)))
		}
		p.partial = !found
		if found {
			out.WriteByte('\n')
		}
		rest = after
	}
	p.write(out.Bytes(), midLine)
	return len(b), nil
}

func (p *Printer) print(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partial {
		b = append([]byte("\n"), b...)
	}
	p.write(b, false)
	p.partial = false
}

// write writes b, which Text made safe. In Actions, while the runner still
// reads workflow commands, b goes between a stop-commands and its resume of
// its own, on this printer's stream, so the runner reads the three in order.
// Text is what makes a line safe; the stop is a second guard.
func (p *Printer) write(b []byte, midLine bool) {
	if p.cmds == nil || p.cmds.Stopped() {
		p.w.Write(b)
		return
	}
	token := newToken()
	var out bytes.Buffer
	if midLine {
		// A stop-commands must start a line of its own.
		out.WriteByte('\n')
	}
	fmt.Fprintf(&out, "::stop-commands::%s\n", token)
	out.Write(b)
	if !bytes.HasSuffix(b, []byte("\n")) {
		out.WriteByte('\n')
		p.partial = false
	}
	fmt.Fprintf(&out, "::%s::\n", token)
	p.w.Write(out.Bytes())
}
