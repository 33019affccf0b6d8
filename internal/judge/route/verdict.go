package route

import (
	"fmt"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
)

// Verdict is the route assertion's outcome: whether the evidence puts the run
// on the fast route, and why, in words a reader of the report can check
// against the log.
type Verdict struct {
	OK     bool
	Detail string
}

// Bounds for text quoted in details; the text is the serve's and untrusted.
const (
	lineQuote   = 200
	deviceQuote = 120
)

// Judge is the route as the log's evidence names it: the fast route when a
// line names it and none names the slow route, the slow route winning the
// doubt, and neither said with what was looked for and what the log says
// about devices.
func Judge(ev Evidence) Verdict {
	var a Verdict
	// if, not switch: each condition is then a statement of its own, which
	// mutation testing can reach.
	if ev.Slow != nil && ev.Fast != nil {
		a.Detail = fmt.Sprintf("the serve log names both routes; the slow route wins the doubt: %s, after %s",
			quoteMatch(ev.Slow), quoteMatch(ev.Fast))
	} else if ev.Slow != nil {
		a.Detail = fmt.Sprintf("the serve log names the slow route: %s; this run is on the slow route", quoteMatch(ev.Slow))
	} else if ev.Fast != nil {
		a.OK = true
		a.Detail = fmt.Sprintf("the serve log names the fast route: %s", quoteMatch(ev.Fast))
	} else {
		a.Detail = neither(ev)
	}
	if ev.LongLines > 0 {
		a.Detail += fmt.Sprintf("; %d line(s) longer than %d KiB, the first at line %d, were read in windows overlapping by %d KiB",
			ev.LongLines, MaxLine>>10, ev.FirstLongLine, Overlap>>10)
	}
	if ev.Dropped > 0 {
		a.Detail += fmt.Sprintf("; %d bytes of the log were cut from serve.log before this reading (the run's own scan read them): evidence there was not seen", ev.Dropped)
	}
	return a
}

// quoteMatch is a matched line as the route detail quotes it.
func quoteMatch(m *Match) string {
	s := fmt.Sprintf("%s (line %d)", quote.Cut(m.Text, lineQuote), m.Line)
	if m.Line == 0 {
		// Not a line of the log: the serve's own account (Account).
		s = fmt.Sprintf("%s (the serve's own account, %s)", quote.Cut(m.Text, lineQuote), m.Pattern)
	}
	if m.Why != "" {
		s += ": " + m.Why
	}
	return s
}

// neither says what was looked for, how to make the serve print it when
// that is known, and what the log does say about devices; a plan for the
// fast route first, where there is one: it says where the serve meant the
// weights to go, not where they went.
func neither(ev Evidence) string {
	d := fmt.Sprintf("the serve log names neither route (fast: %s; slow: %s): the evidence has to be there",
		strings.Join(ev.FastPatterns, ", "), strings.Join(ev.SlowPatterns, ", "))
	if ev.Plan != nil {
		d = "only a plan: " + quoteMatch(ev.Plan) + ", not where the weights went; " + d
	}
	if ev.Hint != "" {
		d += "; " + ev.Hint
	}
	if ev.Lines == 0 {
		return d + "; the log is empty"
	}
	if len(ev.Devices) == 0 && ev.Lines > DeviceLines {
		return d + fmt.Sprintf("; none of its first %d lines (of %d) mentions a device (CPU, GPU, NPU, device, backend, ...); later lines were not looked at",
			DeviceLines, ev.Lines)
	}
	if len(ev.Devices) == 0 {
		return d + fmt.Sprintf("; none of its %d lines mentions a device (CPU, GPU, NPU, device, backend, ...)", ev.Lines)
	}
	var quoted []string
	for i := range ev.Devices {
		quoted = append(quoted, fmt.Sprintf("%s (line %d)", quote.Cut(ev.Devices[i].Text, deviceQuote), ev.Devices[i].Line))
	}
	return d + "; what it says about devices: " + strings.Join(quoted, ", ")
}
