package route

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The reference serve's own wording for its two routes. Its ready line
// names counts ("4 of 4 roles have a 16-row decode kernel"), which is better
// evidence than the route's name: the count rule comes first, so it is the
// one quoted, and a count short of the total is the slow route even on a
// line that names the private route.
var (
	DefaultFast = []string{NoteRule, `on the private route`}
	DefaultSlow = []string{`per-op forward`}
)

// NoteRule is the reference serve's note: how many of its roles have a
// 16-row decode kernel, all of them being the fast route. It is a count rule
// (it starts with CountPrefix), written out whole.
const NoteRule = `count: (\d+) of (\d+) role(?:\(s\)|s)? ha(?:ve|s) a 16-row decode kernel`

// Rule kinds, written before a pattern. A pattern without one is plain RE2:
// a line it matches names that route.
const (
	// CountPrefix (in --fast-route): the pattern has two groups capturing
	// numbers, in either order. Equal, the line names the fast route; not
	// equal, it names the slow route, quoted with both numbers
	// ("offloaded 20/29": 20 of 29).
	CountPrefix = "count: "
	// UnlessFastPrefix (in --slow-route): the line names the slow route only
	// when no line of its model load names the fast route ("CPU_Mapped model buffer"
	// is the slow route only when no device model buffer is there too).
	UnlessFastPrefix = "unless-fast: "
	// HeavierPrefix (in --slow-route): the pattern has one group capturing
	// a size. The lines it matches name the slow route when their sizes,
	// added up over a model load, are more than the sizes the --fast-route
	// patterns with one group capture over it: more of the model in host
	// buffers than on the device ("CPU_Mapped model buffer size = 16000.00
	// MiB" beside "CUDA0 model buffer size = 2000.00 MiB": MoE experts left
	// on the CPU).
	HeavierPrefix = "heavier: "
	// LoadPrefix (in either list): a line it matches starts a model load.
	// unless-fast and heavier rules are decided per load, so a second
	// model loaded on the CPU alone is the slow route even when the first
	// was on the device. With no load rule, the log is one load.
	LoadPrefix = "load: "
	// PlanPrefix (in --fast-route): a line it matches states a plan for
	// the fast route (a scheduler's "offload to cuda ... layers.offload=29"),
	// not where the weights went: it never names the fast route. With no
	// group it is only a plan; with two groups capturing numbers, as a
	// count rule's, a plan for all is only a plan and a plan for fewer
	// (none among them) is the slow route, as the serve is then asked to
	// put no more there. Where no line names a route, the detail says
	// "only a plan" and quotes it.
	PlanPrefix = "plan: "
)

// Match is a log line that matched a route rule.
type Match struct {
	Line    int    `json:"line"` // 1-based, counted by line feeds as in the file
	Text    string `json:"text"` // the line, or a part of it around the match when it is long
	Pattern string `json:"pattern"`
	Why     string `json:"why,omitempty"` // what a rule read: "20 of 29", "and no line of this model load names the fast route"
}

// Evidence is what the serve log says about the route.
type Evidence struct {
	FastPatterns []string `json:"fast_patterns"`
	SlowPatterns []string `json:"slow_patterns"`
	Fast         *Match   `json:"fast,omitempty"` // first line naming the fast route
	Slow         *Match   `json:"slow,omitempty"` // first line naming the slow route
	// Plan is the first line that states only a plan for the fast route
	// (PlanPrefix), or the serve's own account, which reports one: never
	// the fast route's evidence.
	Plan  *Match `json:"plan,omitempty"`
	Lines int    `json:"lines"` // lines read
	// Devices are the first lines that mention a device (CPU, GPU, NPU,
	// backend, ...), for a log that names neither route.
	Devices []Match `json:"devices,omitempty"`
	// LongLines counts lines longer than MaxLine, matched in windows of
	// MaxLine bytes that overlap by Overlap; FirstLongLine is the first.
	LongLines     int `json:"long_lines,omitempty"`
	FirstLongLine int `json:"first_long_line,omitempty"`
	// Hint says how to make the serve print its evidence, when it is known
	// to hide it by default.
	Hint string `json:"hint,omitempty"`
	// Dropped is how many bytes of the log were not read: serve.log keeps
	// its head and tail, and a re-judge with other rules reads only those.
	Dropped int64 `json:"dropped,omitempty"`
}

// MaxLine is how much of one log line is matched at a time. A longer line
// is matched in windows of MaxLine bytes, each starting Overlap bytes before
// the last one ended, so a match of up to Overlap bytes across a cut is
// found; memory stays bounded whatever the serve prints.
const (
	MaxLine = 65536 // 64 KiB
	Overlap = 4096
)

// MaxDevices is how many lines mentioning a device the evidence keeps,
// from the log's first DeviceLines lines (a serve names its devices as it
// starts; past that, the search would cost every line of a long log).
const (
	MaxDevices  = 8
	DeviceLines = 4096
)

// deviceWords are what a line says about devices, in lower case: a line
// holding one in any case mentions a device. Looked for with bytes.Index on
// the line in lower case, which is many times faster than a
// case-insensitive regexp on every line of a log that has none.
var deviceWords = [][]byte{[]byte("cpu"), []byte("gpu"), []byte("npu"), []byte("device"), []byte("backend"), []byte("cuda"), []byte("rocm"),
	[]byte("vulkan"), []byte("metal"), []byte("sycl"), []byte("cann"), []byte("ascend"), []byte("opencl"), []byte("hexagon"), []byte("xdna"),
	[]byte("openvino"), []byte("accel"), []byte("offload")}

type ruleKind int

const (
	plain ruleKind = iota
	count
	unlessFast
	heavier
	load
	plan
)

type rule struct {
	kind       ruleKind
	re         *regexp.Regexp
	src        string // as written, prefix included
	begin, end bool   // anchored at the start or end of the line or text
	// counts: a count rule, or a plan rule with two groups, whose
	// numbers are read. totalFirst: its first group is the total (it is
	// named "total"); otherwise the second is.
	counts, totalFirst bool
	// must is a literal every match holds: a line without it is passed
	// over without running the regexp, which most lines of a log are.
	must []byte
}

// Matcher finds route evidence in a log fed to it line by line. It holds
// only the first match of each route, so it can read a log of any size.
type Matcher struct {
	fast, slow []rule
	ev         Evidence
	cur        modelLoad // the model load being read
	lower      []byte    // a line in lower case, reused
	lastLong   int
}

// Rules are the fast and slow route rules, compiled. Reading a log changes
// nothing in them, so the rules a run's settings were checked with are the
// ones its log is read with: compiled once.
type Rules struct {
	fastSrc, slowSrc []string
	fast, slow       []rule
}

// Compile compiles the fast and slow route rules: RE2 patterns, or a kind
// and a pattern ("count: offloaded (\d+)/(\d+) layers"). Each list needs
// at least one. fastName and slowName say where the lists came from
// (--fast-route, an action's input, a field of a result.json), for the
// messages. Every problem is reported, not only the first.
func Compile(fastName, slowName string, fast, slow []string) (*Rules, error) {
	r := &Rules{fastSrc: fast, slowSrc: slow}
	var errFast, errSlow error
	r.fast, errFast = compileAll(fastName, true, fast)
	r.slow, errSlow = compileAll(slowName, false, slow)
	if err := errors.Join(errFast, errSlow); err != nil {
		return nil, err
	}
	return r, nil
}

// Matcher is a matcher of the rules, with nothing read yet.
func (r *Rules) Matcher() *Matcher {
	return &Matcher{fast: r.fast, slow: r.slow, ev: Evidence{FastPatterns: r.fastSrc, SlowPatterns: r.slowSrc}}
}

// NewMatcher compiles the rules of --fast-route and --slow-route (Compile)
// and gives a matcher of them.
func NewMatcher(fast, slow []string) (*Matcher, error) {
	r, err := Compile("--fast-route", "--slow-route", fast, slow)
	if err != nil {
		return nil, err
	}
	return r.Matcher(), nil
}

func compileAll(name string, fast bool, patterns []string) ([]rule, error) {
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%s: no pattern given; pass at least one RE2 pattern", name)
	}
	var errs []error
	res := make([]rule, 0, len(patterns))
	for _, p := range patterns {
		r, err := compile(name, fast, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res = append(res, r)
	}
	return res, errors.Join(errs...)
}

func compile(name string, fast bool, p string) (rule, error) {
	r := rule{src: p}
	expr := p
	if rest, ok := strings.CutPrefix(p, CountPrefix); ok {
		r.kind, expr = count, rest
	}
	if rest, ok := strings.CutPrefix(p, UnlessFastPrefix); ok {
		r.kind, expr = unlessFast, rest
	}
	if rest, ok := strings.CutPrefix(p, HeavierPrefix); ok {
		r.kind, expr = heavier, rest
	}
	if rest, ok := strings.CutPrefix(p, LoadPrefix); ok {
		r.kind, expr = load, rest
	}
	if rest, ok := strings.CutPrefix(p, PlanPrefix); ok {
		r.kind, expr = plan, rest
	}
	if p == "" {
		return r, fmt.Errorf("%s: an empty pattern matches every line; pass a pattern the serve prints on that route", name)
	}
	if strings.TrimSpace(expr) == "" {
		return r, fmt.Errorf("%s %s: an empty pattern matches every line; pass a pattern the serve prints on that route", name, strconv.Quote(p))
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return r, fmt.Errorf("%s %s is not a valid RE2 pattern: %v", name, strconv.Quote(p), err)
	}
	if r.kind == count && !fast {
		return r, fmt.Errorf("%s %s: a count rule names both routes (counts equal: fast; not equal: slow); pass it as --fast-route", name, strconv.Quote(p))
	}
	if r.kind == count && re.NumSubexp() != 2 {
		return r, fmt.Errorf("%s %s: a count rule needs two groups capturing numbers, e.g. 'count: offloaded (\\d+)/(\\d+) layers'; it has %d", name, strconv.Quote(p), re.NumSubexp())
	}
	if r.kind == unlessFast && fast {
		return r, fmt.Errorf("%s %s: an unless-fast rule names the slow route when no line names the fast one; pass it as --slow-route", name, strconv.Quote(p))
	}
	if r.kind == heavier && fast {
		return r, fmt.Errorf("%s %s: a heavier rule names the slow route when its sizes outweigh the device's; pass it as --slow-route", name, strconv.Quote(p))
	}
	if r.kind == heavier && re.NumSubexp() != 1 {
		return r, fmt.Errorf("%s %s: a heavier rule needs one group capturing a size, e.g. 'heavier: CPU model buffer size = +([0-9.]+) MiB'; it has %d", name, strconv.Quote(p), re.NumSubexp())
	}
	if r.kind == plan && !fast {
		return r, fmt.Errorf("%s %s: a plan rule states a plan for the fast route, never a placement; pass it as --fast-route", name, strconv.Quote(p))
	}
	if r.kind == plan && re.NumSubexp() != 0 && re.NumSubexp() != 2 {
		return r, fmt.Errorf("%s %s: a plan rule has no group, or two capturing numbers (planned, of all), e.g. 'plan: model=(?P<total>\\d+) offload=(\\d+)'; it has %d", name, strconv.Quote(p), re.NumSubexp())
	}
	r.counts = r.kind == count || r.kind == plan && re.NumSubexp() == 2
	if r.counts {
		re, r.totalFirst = anyDigits(re), re.SubexpNames()[1] == "total"
	}
	r.re = re
	r.begin, r.end = anchors(expr)
	r.must = mustHold(expr)
	return r, nil
}

// anyDigits is a count rule whose groups match numbers in any script
// (\pN+: ٤, ４, ...) as well: a count whose numbers are not ASCII digits
// still matches it, and is then read as a count that does not read, not
// passed over for a bare route name on the same line. A group holding
// another group is left as written.
func anyDigits(re *regexp.Regexp) *regexp.Regexp {
	t, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return re
	}
	num, _ := syntax.Parse(`[\pN]+`, syntax.Perl)
	var walk func(*syntax.Regexp)
	walk = func(t *syntax.Regexp) {
		if t.Op == syntax.OpCapture && t.Sub[0].MaxCap() == 0 {
			t.Sub[0] = num
			return
		}
		for _, s := range t.Sub {
			walk(s)
		}
	}
	walk(t)
	// Only groups holding none are changed: the groups are the same.
	loose, err := regexp.Compile(t.String())
	if err != nil {
		return re
	}
	return loose
}

// mustHold is the longest literal that every match of expr holds: a
// case-sensitive literal among the parts expr is a sequence of; nil when
// there is none.
func mustHold(expr string) []byte {
	t, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	t = t.Simplify()
	parts := []*syntax.Regexp{t}
	if t.Op == syntax.OpConcat {
		parts = t.Sub
	}
	var best []byte
	for _, p := range parts {
		if p.Op == syntax.OpLiteral && p.Flags&syntax.FoldCase == 0 {
			if lit := []byte(string(p.Rune)); len(lit) > len(best) {
				best = lit
			}
		}
	}
	// Spaces at the ends are the most common bytes of a line, which the
	// search tries first.
	return bytes.TrimSpace(best)
}

// anchors reports whether a pattern holds a start anchor (^, \A) or an end
// anchor ($, \z): such a pattern is matched only on a window that starts, or
// ends, its line.
func anchors(expr string) (begin, end bool) {
	t, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return false, false
	}
	var walk func(*syntax.Regexp)
	walk = func(t *syntax.Regexp) {
		switch t.Op {
		case syntax.OpBeginLine, syntax.OpBeginText:
			begin = true
		case syntax.OpEndLine, syntax.OpEndText:
			end = true
		}
		for _, s := range t.Sub {
			walk(s)
		}
	}
	walk(t)
	return begin, end
}

// Line feeds the next whole log line (without its line break). A line
// longer than MaxLine is matched on its first MaxLine bytes; a stream of any
// length is fed with Segment. Line keeps no reference to text.
func (m *Matcher) Line(text []byte) {
	m.Segment(m.ev.Lines+1, text[:min(len(text), MaxLine)], true, len(text) <= MaxLine)
}

// Segment feeds part of a log line as a terminal shows it: line is its
// number in the file, text at most MaxLine bytes of it; start says the text
// starts a line (or follows a carriage return), end that it ends one. Parts
// of a long line are fed in overlapping windows. Segment keeps no reference
// to text.
func (m *Matcher) Segment(line int, text []byte, start, end bool) {
	m.ev.Lines = max(m.ev.Lines, line)
	if !start && m.lastLong != line {
		m.lastLong = line
		m.ev.LongLines++
		if m.ev.FirstLongLine == 0 {
			m.ev.FirstLongLine = line
		}
	}
	// Every rule on every line: a line without a rule's literal costs one
	// search, and the first match of each kind is kept where it is set.
	for i := range m.fast {
		m.feed(&m.fast[i], true, line, text, start, end)
	}
	for i := range m.slow {
		m.feed(&m.slow[i], false, line, text, start, end)
	}
	if len(m.ev.Devices) < MaxDevices && start && line <= DeviceLines {
		if at, ok := m.deviceWord(text); ok {
			m.ev.Devices = append(m.ev.Devices, Match{Line: line, Text: excerpt(text, at, at)})
		}
	}
}

// deviceWord finds a device word in text, in any case (the first of
// deviceWords that is there): where it starts, and whether there is one.
func (m *Matcher) deviceWord(text []byte) (at int, ok bool) {
	m.lower = m.lower[:0]
	for _, c := range text {
		m.lower = append(m.lower, lower[c])
	}
	for _, w := range deviceWords {
		if i := bytes.Index(m.lower, w); i >= 0 {
			return i, true
		}
	}
	return 0, false
}

// lower maps each byte to itself, but ASCII capitals to small letters.
var lower = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = byte(c - 'A' + 'a')
	}
	return t
}()

// feed matches one rule of the fast or slow list on one window and records
// what it names.
func (m *Matcher) feed(r *rule, fast bool, line int, text []byte, start, end bool) {
	if r.begin && !start || r.end && !end {
		return
	}
	if !bytes.Contains(text, r.must) || !r.re.Match(text) {
		return
	}
	if r.counts {
		// Every count on the line: one short count among full ones is
		// the slow route.
		for _, loc := range r.re.FindAllSubmatchIndex(text, -1) {
			m.counted(r, line, text, loc)
		}
		return
	}
	loc := r.re.FindSubmatchIndex(text)
	found := &Match{Line: line, Text: excerpt(text, loc[0], loc[1]), Pattern: r.src}
	switch r.kind {
	case load:
		m.cur.decide(&m.ev)
		m.cur = modelLoad{}
	case unlessFast:
		found.Why = "and no line of this model load names the fast route"
		if m.cur.weak == nil {
			m.cur.weak = found
		}
	case heavier:
		m.cur.host += size(text, loc)
		if m.cur.heavy == nil {
			m.cur.heavy = found
		}
	case plan:
		m.setPlan(found)
	default:
		if fast {
			m.cur.device += size(text, loc)
			m.setFast(found)
			return
		}
		m.setSlow(found)
	}
}

// size is the number a rule's one group captured, or 0 when there is no
// such group or it is not a size (not a number, NaN, infinite, negative).
func size(text []byte, loc []int) float64 {
	if len(loc) != 4 || loc[2] < 0 {
		return 0
	}
	v, err := strconv.ParseFloat(string(text[loc[2]:loc[3]]), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || math.Signbit(v) {
		return 0
	}
	return v
}

// modelLoad is what the lines of one model load said: unless-fast and
// heavier rules are decided on it.
type modelLoad struct {
	fast         bool   // a line of it named the fast route
	weak         *Match // its first unless-fast match
	heavy        *Match // its first heavier match
	host, device float64
}

// decide sets the slow route on ev, unless already set, when the load's
// unless-fast lines stand (no line of it named the fast route), or its
// host sizes outweigh its device sizes.
func (l *modelLoad) decide(ev *Evidence) {
	if ev.Slow != nil {
		return
	}
	if l.weak != nil && !l.fast {
		ev.Slow = l.weak
		return
	}
	if l.heavy != nil && l.host > l.device {
		heavy := *l.heavy
		heavy.Why = fmt.Sprintf("%s in host buffers in this model load, more than the %s on the device", number(l.host), number(l.device))
		ev.Slow = &heavy
	}
}

func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// counted reads one match of a count rule, or of a plan rule with two
// groups: the numbers as the serve printed them, the counted one first.
// All counted is the fast route (for a plan rule, only a plan); fewer, more
// than the total, nothing at all (0 of 0), or numbers that do not read
// (beyond 64 bits, digits of another script) are the slow route.
func (m *Matcher) counted(r *rule, line int, text []byte, loc []int) {
	found := &Match{Line: line, Text: excerpt(text, loc[0], loc[1]), Pattern: r.src}
	a, b := string(text[loc[2]:loc[3]]), string(text[loc[4]:loc[5]])
	if r.totalFirst {
		a, b = b, a
	}
	n, errN := strconv.ParseUint(a, 10, 64)
	total, errM := strconv.ParseUint(b, 10, 64)
	if errN != nil || errM != nil {
		found.Why = fmt.Sprintf("%s of %s: a count that does not read as two numbers", strconv.Quote(a), strconv.Quote(b))
		m.setSlow(found)
		return
	}
	found.Why = fmt.Sprintf("%d of %d", n, total)
	if r.kind == plan {
		found.Why += " planned"
	}
	if n == total && total > 0 && r.kind == plan {
		m.setPlan(found)
		return
	}
	if n == total && total > 0 {
		m.setFast(found)
		return
	}
	if n < total {
		found.Why += ", not all"
	} else if n > total {
		found.Why += ", more than all"
	} else {
		found.Why += ", nothing counted" // 0 of 0
	}
	m.setSlow(found)
}

// setFast and setSlow keep the first line that names each route.
func (m *Matcher) setFast(found *Match) {
	m.cur.fast = true
	if m.ev.Fast == nil {
		m.ev.Fast = found
	}
}

func (m *Matcher) setSlow(found *Match) {
	if m.ev.Slow == nil {
		m.ev.Slow = found
	}
}

// setPlan keeps the first line that states only a plan; it names no route.
func (m *Matcher) setPlan(found *Match) {
	if m.ev.Plan == nil {
		m.ev.Plan = found
	}
}

// Evidence is what the lines fed so far say, the model load being read
// decided as it stands.
func (m *Matcher) Evidence() Evidence {
	ev := m.ev
	cur := m.cur
	cur.decide(&ev)
	return ev
}

// excerptMax is how much of a line a match keeps: a long line is cut to
// the part around the match, so the quote shows it.
const excerptMax = 300

// excerpt is text, or the part of it around [from, to) when it is longer
// than excerptMax, with "..." where it was cut.
func excerpt(text []byte, from, to int) string {
	if len(text) <= excerptMax {
		return string(text)
	}
	lo := max(0, from-excerptMax/3)
	hi := min(len(text), max(to, lo+excerptMax))
	hi = min(hi, lo+3*excerptMax)
	for lo > 0 && !utf8.RuneStart(text[lo]) {
		lo--
	}
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi++
	}
	s := string(text[lo:hi])
	if lo > 0 {
		s = "..." + s
	}
	if hi < len(text) {
		s += "..."
	}
	return s
}
