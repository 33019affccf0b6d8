package report

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// MarkdownLimit bounds the summary: GitHub cuts a check run's summary and a
// comment at 65,535 characters.
const MarkdownLimit = 65535

// Console writes one line per assertion, then the verdict, in the shape of
// the reference tool:
//
//	route        ok    the serve log names the fast route: "..."
//	RESULT: PASS
func Console(w io.Writer, r *Result) {
	for _, a := range r.Assertions {
		status := "FAIL"
		if a.OK {
			status = "ok"
		}
		if a.Info {
			status = "info"
		}
		fmt.Fprintf(w, "%-12s %-5s %s\n", a.Name, status, ConsoleText(a.Detail))
	}
	switch r.Verdict {
	case Pass:
		fmt.Fprintln(w, "RESULT: PASS")
	case Cancelled:
		fmt.Fprintln(w, "RESULT: FAIL (cancelled)")
	default:
		fmt.Fprintln(w, "RESULT: FAIL")
	}
}

// ConsoleText makes text safe to print on one console line (console.Text).
func ConsoleText(s string) string { return console.Text(s) }

func isControl(c rune) bool { return console.IsControl(c) }

// Markdown renders the run for people: the verdict, the assertions, each
// reply's figures, the facts of the run and, on failure, the serve log's
// tail. It is cut to at most limit bytes, dropping the log tail first.
func Markdown(r *Result, limit int) string {
	md := markdown(r, true)
	if len(md) <= limit {
		return md
	}
	return Cut(markdown(r, false), limit)
}

// Cut cuts Markdown to at most limit bytes, at a line break, with a visible
// note saying so.
func Cut(md string, limit int) string {
	if len(md) <= limit {
		return md
	}
	note := fmt.Sprintf("\n\n_This report was cut to %d characters; out/%s has all of it._\n", limit, ResultFile)
	cut := md[:max(0, limit-len(note))]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	return cut + note
}

func markdown(r *Result, withTail bool) string {
	var b strings.Builder
	icon, word := "❌", "FAIL"
	switch r.Verdict {
	case Pass:
		icon, word = "✅", "PASS"
	case Cancelled:
		icon, word = "⏹️", "CANCELLED"
	}
	fmt.Fprintf(&b, "### %s npu serve smoke: %s\n\n", icon, word)
	if iv := r.Intervals.Rate; iv != nil {
		fmt.Fprintf(&b, "Median decode rate **%.1f tok/s** (%s; floor %.1f)", iv.Median, IntervalText(iv, 1), r.Limits.Floor)
		if ft := r.Intervals.FirstToken; ft != nil {
			fmt.Fprintf(&b, ", median first token **%.0f ms** (%s; limit %.0f)", ft.Median, IntervalText(ft, 0), r.Limits.FirstTokenMS)
		}
		fmt.Fprintf(&b, ", over %s.", Replies(iv.N))
		if r.Extra.Replies > 0 {
			fmt.Fprintf(&b, " After %s %s, so the gate took %d more (at most %d in all).",
				Replies(len(r.Replies)-r.Extra.Replies), Cell(r.Extra.Why, 200), r.Extra.Replies, r.Extra.Max)
		}
		if s := r.Signs; s != nil {
			b.WriteString(" " + SignsText(s, len(r.Replies), r.Extra.Max))
		}
		b.WriteString("\n\n")
	}
	if r.NoReplies != "" {
		fmt.Fprintf(&b, "No replies: %s.\n\n", Cell(r.NoReplies, 500))
	}
	if len(r.Unwritten) > 0 {
		fmt.Fprintf(&b, "Not written: %s. Those replies are in %s without their tokens.\n\n", Cell(strings.Join(r.Unwritten, "; "), 1000), ResultFile)
	}

	b.WriteString("| assertion | result | detail |\n|---|---|---|\n")
	for _, a := range r.Assertions {
		res := "❌ FAIL"
		if a.OK {
			res = "✅ ok"
		}
		if a.Info {
			res = "ℹ️ info"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", a.Name, res, Cell(a.Detail, 1000))
	}

	if len(r.Replies) > 0 {
		agrees := r.Reference != nil && r.Reference.Missing == ""
		b.WriteString("\n#### Replies\n\n| # | prompt | first token | decode | tokens | serve's rate | prompt cache |")
		if agrees {
			b.WriteString(" agrees |")
		}
		b.WriteString(" reply |\n|---:|---|---:|---:|---:|---:|---:|")
		if agrees {
			b.WriteString("---|")
		}
		b.WriteString("---|\n")
		for i := range r.Replies {
			cell := ""
			if agrees {
				cell = AgreesCell(r.Agreement, r.Replies[i].N)
			}
			b.WriteString(replyRow(&r.Replies[i], cell))
		}
		if agrees {
			b.WriteString("\n<sub>agrees: the tokens (or, when either side sent no logprobs, the bytes: text only, weaker evidence) equal to the reference's reply to the same prompt before the first divergence, of the longer reply; \"tie\" when that divergence is at a near-tie of the reference's, and the two tokens quoted when it is a real disagreement.</sub>\n")
		}
		fmt.Fprintf(&b, "\n<sub>first token: from just before the request was written to the first chunk with content or reasoning. decode: (tokens − 1) / (last − first chunk), which leaves the first token and prefill out. tokens: usage, else the serve's timings, else chunks (marked ≈). Rate judged on: %s. Warm-ups (%d) are not judged. Intervals: the median's distribution-free interval from order statistics, with its coverage, descriptive: the gate looks after every reply, so they are not what decides; the sign counts are (docs/measuring.md).</sub>\n",
			rateSource(r.Limits.RateSource), len(r.Warmups))
		b.WriteString(chart(r))
	}

	b.WriteString(loadTable(r))

	b.WriteString("\n| | |\n|---|---|\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", k, v)
		}
	}
	if g := r.GitHub; g != nil {
		row("commit", Cell(g.SHA, 40))
		row("runner", Cell(g.Runner, 100))
	}
	row("model", Cell(r.Run.Model, 200))
	if bl := r.Baseline; bl != nil {
		row("baseline", BaselineText(bl, r.Limits.Regression(), 200))
	}
	if ref := r.Reference; ref != nil {
		row("reference", ReferenceText(ref))
	}
	if r.Run.Kind == KindReference {
		row("kind", "a reference, recorded by npu-serve-smoke record: route, rate and first token recorded, not judged")
	}
	row("serve", Cell(strings.Join(r.Serve.Argv, " "), 300))
	row("hold", holdText(r.Hold))
	if r.Serve.ReadyPath != "" {
		row("serve ready", fmt.Sprintf("%s (%s, port %d)", seconds(r.Serve.ReadyMS), Cell(r.Serve.ReadyPath, 100), r.Serve.Port))
	}
	row("serve stop", stopText(r.Serve))
	if seed := r.Run.OrderSeed; seed != nil {
		row("asked", fmt.Sprintf("%s (at least %d, at most %d) + %d warm-up, max %d tokens, thinking %s, prompts %s in the order of seed %d",
			Replies(len(r.Replies)), r.Run.Replies, r.Extra.Max, r.Run.Warmup, r.Run.MaxTokens, Cell(r.Run.Thinking, 10), Cell(r.Run.Prompts, 200), *seed))
	} else {
		row("asked", fmt.Sprintf("%s + %d warm-up, max %d tokens, thinking %s, prompts %s", Replies(r.Run.Replies), r.Run.Warmup, r.Run.MaxTokens, Cell(r.Run.Thinking, 10), Cell(r.Run.Prompts, 200)))
	}
	row("logprobs", LogprobsText(r.Replies))
	if g := r.GitHub; g != nil && g.RunURL != "" {
		row("run", link("logs", g.RunURL))
	}
	if r.Serve.LogDropped > 0 {
		row("serve log", fmt.Sprintf("%d bytes, %d of them cut from serve.log (its head and tail kept); the route was read on all of them", r.Serve.LogBytes, r.Serve.LogDropped))
	}
	if withTail && !r.Pass() && len(r.Serve.LogTail) > 0 {
		fmt.Fprintf(&b, "\n<details><summary>serve log: the last %d lines of %d bytes</summary>\n\n", len(r.Serve.LogTail), r.Serve.LogBytes)
		b.WriteString(codeBlock(r.Serve.LogTail))
		b.WriteString("\n</details>\n")
	}
	return b.String()
}

// MinIntervalFigures is the fewest figures whose median has an interval
// worth the name: one figure's [min, max] holds the median with probability
// 0, two figures' with ½.
const MinIntervalFigures = 3

// Replies is "1 reply" or "n replies".
func Replies(n int) string {
	if n == 1 {
		return "1 reply"
	}
	return strconv.Itoa(n) + " replies"
}

// IntervalText is "95% interval 84.7–100.0" with prec decimals, or, below
// MinIntervalFigures, "no interval from 2 replies".
func IntervalText(iv *stats.Interval, prec int) string {
	if iv.N < MinIntervalFigures {
		return "no interval from " + Replies(iv.N)
	}
	return fmt.Sprintf("%s %.*f–%.*f, descriptive", coverage(iv), prec, iv.Lo, prec, iv.Hi)
}

// SignsText is the sentence the report's headline ends with: whether both
// sign counts decided (and "close to" a limit all the same when the
// median's interval holds it), or which did not, in how many replies, and
// that the median then decides, "close to" its limit; "undecided" when fewer replies
// were asked than the lead, which no count of them can reach.
func SignsText(s *judge.Signs, n, maxReplies int) string {
	counts := fmt.Sprintf("rate: %d meet the floor, %d miss it; first token: %d meet the limit, %d miss it",
		s.Rate.Meet, s.Rate.Miss, s.FirstToken.Meet, s.FirstToken.Miss)
	if b := s.Baseline; b != nil {
		counts += fmt.Sprintf("; against the baseline, rate: %d meet its bound, %d miss it; first token: %d meet its bound, %d miss it",
			b.Rate.Meet, b.Rate.Miss, b.FirstToken.Meet, b.FirstToken.Miss)
	}
	counts += fmt.Sprintf("; --lead %d", s.Rate.Lead)
	if s.Rate.Meet+s.Rate.Miss < n || s.FirstToken.Meet+s.FirstToken.Miss < n {
		// The gate stopped at a reply without a figure: that failure,
		// not the median, decides.
		return fmt.Sprintf("The gate stopped after %s: a reply has no rate or no first token, which fails the run whatever the sign counts (%s).", Replies(n), counts)
	}
	var close []string
	if !s.Rate.Decided {
		close = append(close, "the floor")
	}
	if !s.FirstToken.Decided {
		close = append(close, "the first-token limit")
	}
	decided := "Both sign counts"
	if b := s.Baseline; b != nil {
		decided = "The four sign counts"
		if !b.Rate.Decided || !b.FirstToken.Decided {
			close = append(close, "the baseline's bounds")
		}
	}
	if len(close) == 0 {
		// Decided, and the median's interval may hold a limit all the
		// same: the report says so (stats.Count.Close).
		var near []string
		if s.Rate.Close() {
			near = append(near, "the floor")
		}
		if s.FirstToken.Close() {
			near = append(near, "the first-token limit")
		}
		if len(near) > 0 {
			return fmt.Sprintf("%s decided, close to %s all the same: the median's interval holds it (%s).", decided, strings.Join(near, " and "), counts)
		}
		return fmt.Sprintf("%s decided (%s).", decided, counts)
	}
	if n < s.Rate.Lead {
		// No count of n replies reaches the lead: nothing says the serve
		// is close to its limits.
		return fmt.Sprintf("Undecided: %s, fewer than --lead %d, cannot decide a sign count, and the median decides (%s).", Replies(n), s.Rate.Lead, counts)
	}
	return fmt.Sprintf("Close to %s: the sign counts did not decide in %s (at most %d), and the median decides (%s).",
		strings.Join(close, " and "), Replies(n), maxReplies, counts)
}

// coverage names an interval by its coverage: "95% interval", or the lower
// figure a handful of replies allows.
func coverage(iv *stats.Interval) string {
	return fmt.Sprintf("%s%% interval", strconv.FormatFloat(math.Floor(iv.Coverage*1000)/10, 'f', -1, 64))
}

// chart is a Mermaid chart (GitHub renders it) of each reply's decode rate
// against the floor, and the baseline's median when there is one. It holds
// only numbers the gate computed.
func chart(r *Result) string {
	var bars []string
	top := r.Limits.Floor
	for i := range r.Replies {
		v, ok := r.Rate(&r.Replies[i])
		if !ok {
			v = 0
		}
		v = math.Round(v*10) / 10
		top = max(top, v)
		bars = append(bars, strconv.FormatFloat(v, 'f', -1, 64))
	}
	line := func(v float64) string {
		return "    line [" + strings.TrimSuffix(strings.Repeat(strconv.FormatFloat(v, 'f', -1, 64)+", ", len(bars)), ", ") + "]\n"
	}
	var b strings.Builder
	b.WriteString("\n```mermaid\nxychart-beta\n    title \"Decode rate per reply (tok/s)\"\n")
	var xs []string
	for i := range r.Replies {
		xs = append(xs, strconv.Itoa(r.Replies[i].N))
	}
	legend := fmt.Sprintf("bars: each reply; first line: the floor (%.1f)", r.Limits.Floor)
	if bl := r.Baseline; bl != nil {
		top = max(top, bl.Rate)
		legend += fmt.Sprintf("; second line: the baseline's median (%.1f)", bl.Rate)
	}
	fmt.Fprintf(&b, "    x-axis \"reply\" [%s]\n    y-axis \"tok/s\" 0 --> %s\n    bar [%s]\n", strings.Join(xs, ", "), strconv.FormatFloat(math.Ceil(top+top/10), 'f', -1, 64), strings.Join(bars, ", "))
	b.WriteString(line(r.Limits.Floor))
	if bl := r.Baseline; bl != nil {
		b.WriteString(line(math.Round(bl.Rate*10) / 10))
	}
	b.WriteString("```\n\n<sub>" + legend + "</sub>\n")
	return b.String()
}

func replyRow(rep *measure.Reply, agrees string) string {
	ft := "—"
	if v, ok := rep.FirstTokenMS(); ok {
		ft = fmt.Sprintf("%.0f ms", v)
	}
	rate := "—"
	if e := rep.Estimate(); e.Why == "" {
		rate = fmt.Sprintf("%.1f tok/s", e.Rate)
		if e.Method == measure.MethodRegression {
			rate += fmt.Sprintf(" (regression, %d arrivals)", e.Arrivals)
		}
	} else if e.Why == measure.Burst {
		rate = "— (one burst)"
	}
	c := rep.Count()
	tokens := strconv.Itoa(c.N)
	if c.Source == measure.SourceChunks {
		tokens = "≈" + tokens
	}
	if c.Doubt != "" {
		tokens += " (the serve's count not believed)"
	}
	server := "—"
	if e := rep.ServerEstimate(); e.Why == "" {
		server = fmt.Sprintf("%.1f tok/s", e.Rate)
		if d, ok := rep.Disagreement(); ok && d > judge.Disagree {
			server += fmt.Sprintf(" (differs %.0f%%)", d*100)
		}
	}
	cache := "—"
	if ch, ok := rep.Cache(); ok {
		cache = fmt.Sprintf("%d/%d", ch.Cached, ch.Prompt)
		if ch.Hit {
			cache = "**hit** " + cache
		}
	}
	excerpt := Cell(rep.Content, 80)
	switch {
	case rep.Error != "":
		excerpt = "error: " + Cell(rep.Error, 120)
	case strings.TrimSpace(rep.Content) == "" && rep.Reasoning != "":
		excerpt = "(reasoning only) " + Cell(rep.Reasoning, 60)
	case strings.TrimSpace(rep.Content) == "":
		excerpt = "(empty)"
	}
	if rep.Retried != "" {
		excerpt = "(asked twice: the first attempt failed before any answer: " + Cell(rep.Retried, 60) + ") " + excerpt
	}
	if agrees != "" {
		excerpt = agrees + " | " + excerpt
	}
	return fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s | %s |\n", rep.N, Cell(rep.Prompt, 40), ft, rate, tokens, server, cache, excerpt)
}

func rateSource(s string) string {
	if s == judge.RateServer {
		return "the serve's own figures (--rate-source server)"
	}
	return "the client's stream timing"
}

func holdText(h HoldFacts) string {
	if h.Mode == "none" || h.Mode == "" {
		return "none (--hold none): the device was not held"
	}
	on := Cell(h.Device, 50)
	if len(h.Devices) > 0 {
		on += " (" + Cell(strings.Join(h.Devices, ","), 200) + ")"
	}
	return fmt.Sprintf("%s on %s: waited %s, held %s", Cell(h.Mode, 100), on, seconds(h.WaitedMS), seconds(h.HeldMS))
}

func stopText(s ServeFacts) string {
	if s.Exit == "" {
		return ""
	}
	how := " (it had exited)"
	if s.Signal != "" {
		how = " (" + Cell(s.Signal, 50) + ")"
	}
	if strings.HasSuffix(s.Exit, how) { // "stopped by the gate (TERM)"
		how = ""
	}
	text := fmt.Sprintf("%s%s in %s; %d swept, %d survivors", Cell(s.Exit, 100), how, seconds(s.StopMS), s.Swept, s.Survivors)
	if s.Contain != "" {
		text += " (" + Cell(s.Contain, 20) + ")"
	}
	return text
}

// plainURL is an http(s) URL with nothing in it that Markdown or HTML would
// read: no spaces, parentheses, brackets, quotes or angle brackets.
var plainURL = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/%+=-]*)?$`)
})

// link is a Markdown link to u when u is a plain URL, else u as text.
func link(text, u string) string {
	if plainURL().MatchString(u) {
		return "[" + text + "](" + u + ")"
	}
	return Cell(u, 300)
}

func seconds(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}

// Cell makes untrusted text safe in a Markdown table cell and in running
// text: one line, at most n runes, no HTML, no table pipes, no code spans,
// no math, no links (bare ones GitHub would link by itself included), no
// @mentions and no #references, and no invisible format characters (bidi
// overrides, zero-width characters: shown as U+FFFD).
func Cell(s string, n int) string {
	return unlinked(escapeCell(s, n))
}

// joiner is the zero-width joiner put inside what GitHub would read as a
// link or a reference: the text reads the same, and no longer matches.
const joiner = "\u200d"

// autolinks are what GitHub links in plain text with no Markdown around it
// (GFM's autolink extension and GitHub's autolinked references): a URL's
// scheme before "://" (cmark-gfm reads the letters just before the colon,
// without case), "www." (then a domain), and GH-N. A joiner goes between
// the scheme and its colon, after "www" and after "GH-". Email addresses,
// @mentions, #N and owner/repo#N are broken where Cell escapes "@" and "#".
var autolinks = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(https?|ftp)(://)|(www)(\.)|(gh-)([0-9])`) })

func unlinked(s string) string {
	return autolinks().ReplaceAllStringFunc(s, func(m string) string {
		i := strings.IndexAny(m, ":.0123456789")
		if strings.HasPrefix(strings.ToLower(m), "gh-") {
			i = 3
		}
		return m[:i] + joiner + m[i:]
	})
}

func escapeCell(s string, n int) string {
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '\n' || c == '\r' || c == '\t':
			b.WriteByte(' ')
		case isControl(c):
			b.WriteRune('\uFFFD')
		case c == '&':
			b.WriteString("&amp;")
		case c == '<':
			b.WriteString("&lt;")
		case c == '>':
			b.WriteString("&gt;")
		case c == '"':
			b.WriteString("&quot;")
		case c == '|':
			b.WriteString("&#124;")
		case c == '`':
			b.WriteString("&#96;")
		case c == '@':
			// A zero-width joiner after @ keeps it from naming anyone.
			b.WriteString("@\u200d")
		case c == '#':
			// The entity keeps it from starting a heading; GitHub finds
			// references in the text as rendered, where the entity is a
			// "#" again, so a joiner follows it.
			b.WriteString("&#35;" + joiner)
		case c == '$':
			// Two dollar signs in a line make GitHub render math between
			// them, and a backslash does not stop it there; a dollar sign
			// alone in a span does (GitHub's docs: "Writing mathematical
			// expressions").
			b.WriteString("<span>$</span>")
		case strings.ContainsRune(`\[]*_~!()`, c):
			b.WriteByte('\\')
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// codeBlock fences lines so that nothing in them renders: the fence is longer
// than any run of backticks inside, and control characters are replaced.
func codeBlock(lines []string) string {
	longest := 0
	for _, l := range lines {
		run := 0
		for _, c := range l {
			if c == '`' {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	var b strings.Builder
	b.WriteString(fence + "text\n")
	for _, l := range lines {
		b.WriteString(strings.Map(func(c rune) rune {
			if isControl(c) && c != '\t' {
				return '\uFFFD'
			}
			return c
		}, l))
		b.WriteByte('\n')
	}
	b.WriteString(fence + "\n")
	return b.String()
}

// RouteName names what the log said of the route in one word: fast, slow,
// both or neither (the step output, and a fleet row).
func RouteName(ev route.Evidence) string {
	switch {
	case ev.Fast != nil && ev.Slow != nil:
		return "both"
	case ev.Slow != nil:
		return "slow"
	case ev.Fast != nil:
		return "fast"
	}
	return "neither"
}

// ReferenceText is the reference a run was compared with, for a table's
// cell: where it came from, its kind, and what was checked.
func ReferenceText(ref *Reference) string {
	if ref.Missing != "" {
		return fmt.Sprintf("%s: none usable: %s", Cell(ref.File, 200), Cell(ref.Missing, 400))
	}
	return fmt.Sprintf("%s (%s): %s kept, %d with logprobs; the same max_tokens (%d), thinking (%s) and %d first-round prompts",
		Cell(ref.File, 200), Cell(ref.Kind, 20), Replies(ref.Checked.Replies), ref.Checked.Logprobs, ref.Checked.MaxTokens, Cell(ref.Checked.Thinking, 10), ref.Checked.Prompts)
}

// AgreesCell is the agreement of reply n for the replies table: "128/128",
// "41/128 tie", the two tokens of a real disagreement, or why it was not
// compared. Serve text is quoted (quote.Cut) and made a safe cell.
func AgreesCell(as []agree.Reply, n int) string {
	i := slices.IndexFunc(as, func(a agree.Reply) bool { return a.N == n })
	if i < 0 {
		return "—"
	}
	return Cell(AgreesText(as[i]), 200)
}

// AgreesText is one reply's agreement in a few words (AgreesCell), as plain
// text.
func AgreesText(a agree.Reply) string {
	if a.RefN == 0 {
		return "not in the reference"
	}
	s := fmt.Sprintf("%d/%d", a.Agree, a.Of)
	if a.Unit == agree.UnitBytes {
		s += " bytes (text only)"
	}
	if d := a.Diverged; d != nil {
		if d.Tie {
			s += " tie"
			if d.Gap != nil {
				s += fmt.Sprintf(" (gap %.2f)", *d.Gap)
			}
		} else {
			s += fmt.Sprintf(", disagrees: the reference %s, this run %s", quote.Cut(d.Ref.Text, 20), quote.Cut(d.Run.Text, 20))
		}
	}
	if a.KL != nil {
		s += fmt.Sprintf(", KL %.3g", *a.KL)
	}
	if !a.OK {
		s = "❌ " + s
	}
	return s
}

// LogprobsText says what became of asking for logprobs over the replies:
// how many sent them, and a refusal or garbage with the serve's words, cut
// and escaped (they are the serve's). "" when none of the replies asked.
func LogprobsText(replies []measure.Reply) string {
	var sent, none, refused, garbage int
	var refusal, dropped string
	k := 0
	for i := range replies {
		rep := &replies[i]
		k = max(k, rep.TopLogprobs)
		switch rep.Logprobs {
		case measure.LogprobsSent:
			sent++
		case measure.LogprobsNone:
			none++
		case measure.LogprobsRefused:
			refused++
			if refusal == "" {
				refusal = rep.LogprobsDetail
			}
		case measure.LogprobsGarbage:
			garbage++
			if dropped == "" {
				dropped = rep.LogprobsDetail
			}
		}
	}
	if sent+none+refused+garbage == 0 {
		return ""
	}
	var parts []string
	if sent+none+garbage > 0 {
		parts = append(parts, fmt.Sprintf("top %d asked: sent with %d of %d replies", k, sent, len(replies)))
	}
	if none > 0 {
		parts = append(parts, fmt.Sprintf("none sent with %d", none))
	}
	if garbage > 0 {
		parts = append(parts, fmt.Sprintf("dropped from %d as not to be believed: %s", garbage, Cell(dropped, 120)))
	}
	if refused > 0 {
		parts = append(parts, fmt.Sprintf("refused by the serve (asked again without them, %d replies): %s", refused, Cell(refusal, 120)))
	}
	return strings.Join(parts, "; ")
}

// Prepare renders an empty result and an empty reply once and keeps
// nothing: what a first rendering builds (the JSON encoders of Result and
// measure.Reply, the patterns compiled when first used) is then built. The
// gate calls it while the serve loads, which takes seconds for a real
// serve, so that the first reply's file and the report after the stop
// wait for none of it.
func Prepare() {
	var r Result
	resultBytes(ResultFile, &r)
	Markdown(&r, MarkdownLimit)
	Console(io.Discard, &r)
	ReplyBytes(ReplyFile(&measure.Reply{}), &measure.Reply{})
}

// BaselineText is the baseline as the report's header gives it: its
// medians and the change allowed, and what each reply is held against,
// the medians' conservative ends where its replies bound them; where they
// are too few to, that the baseline is not judged. The file is cut to
// limit.
func BaselineText(bl *judge.Baseline, reg float64, limit int) string {
	head := fmt.Sprintf("%s: median %.1f tok/s, first token %.0f ms", Cell(bl.File, limit), bl.Rate, bl.FirstTokenMS)
	switch {
	case bl.TooFew():
		return fmt.Sprintf("%s; not judged: its %s cannot bound its median at %.0f%%", head, Replies(bl.Replies), judge.BaselineLevel*100)
	case bl.Bounded():
		return fmt.Sprintf("%s; allowed change %.0f%% below its low end %.1f tok/s and above its high end %.0f ms (its %s bound each median at %.0f%%)",
			head, reg*100, bl.RateEnd(), bl.FirstTokenEnd(), Replies(bl.Replies), bl.Coverage*100)
	}
	return fmt.Sprintf("%s; allowed change %.0f%%", head, reg*100)
}
