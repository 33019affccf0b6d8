package judge

import (
	"fmt"
	"regexp"
	"strconv"
)

// The reference serve's own wording for its two routes.
var (
	DefaultFastRoute = []string{`on the private route`}
	DefaultSlowRoute = []string{`per-op forward`}
)

// Match is a log line that matched a route pattern.
type Match struct {
	Line    int    `json:"line"` // 1-based
	Text    string `json:"text"` // the line, cut to MaxLine bytes
	Pattern string `json:"pattern"`
}

// Evidence is what the serve log says about the route.
type Evidence struct {
	FastPatterns []string `json:"fast_patterns"`
	SlowPatterns []string `json:"slow_patterns"`
	Fast         *Match   `json:"fast,omitempty"` // first line naming the fast route
	Slow         *Match   `json:"slow,omitempty"` // first line naming the slow route
	Lines        int      `json:"lines"`          // lines read
}

// MaxLine is how much of one log line is matched and kept; the rest of a
// longer line is passed over, so memory stays bounded whatever the serve
// prints.
const MaxLine = 65536 // 64 KiB

// RouteMatcher finds route evidence in a log fed to it line by line. It holds
// only the first match of each route, so it can read a log of any size.
type RouteMatcher struct {
	fast, slow []*regexp.Regexp
	ev         Evidence
}

// NewRouteMatcher compiles the fast and slow route patterns (RE2). Each list
// needs at least one pattern.
func NewRouteMatcher(fast, slow []string) (*RouteMatcher, error) {
	m := &RouteMatcher{ev: Evidence{FastPatterns: fast, SlowPatterns: slow}}
	var err error
	if m.fast, err = compileAll("fast-route", fast); err != nil {
		return nil, err
	}
	if m.slow, err = compileAll("slow-route", slow); err != nil {
		return nil, err
	}
	return m, nil
}

func compileAll(name string, patterns []string) ([]*regexp.Regexp, error) {
	if len(patterns) == 0 {
		return nil, fmt.Errorf("--%s: no pattern given; pass at least one RE2 pattern", name)
	}
	res := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		if p == "" {
			return nil, fmt.Errorf("--%s: an empty pattern matches every line; pass a pattern the serve prints on that route", name)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("--%s %s is not a valid RE2 pattern: %v", name, strconv.Quote(p), err)
		}
		res = append(res, re)
	}
	return res, nil
}

// Line feeds the next log line (without its line break). A line longer than
// MaxLine is matched on its first MaxLine bytes. Line keeps no reference to
// text.
func (m *RouteMatcher) Line(text []byte) {
	m.ev.Lines++
	text = text[:min(len(text), MaxLine)]
	if m.ev.Fast == nil {
		m.ev.Fast = firstMatch(m.fast, m.ev.Lines, text)
	}
	if m.ev.Slow == nil {
		m.ev.Slow = firstMatch(m.slow, m.ev.Lines, text)
	}
}

func firstMatch(res []*regexp.Regexp, line int, text []byte) *Match {
	for _, re := range res {
		if re.Match(text) {
			return &Match{Line: line, Text: string(text), Pattern: re.String()}
		}
	}
	return nil
}

// Evidence is what the lines fed so far say.
func (m *RouteMatcher) Evidence() Evidence { return m.ev }
