package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// MaxStreams is the most streams --load asks at once (config.MaxLoad), and
// MaxLoadRounds the most rounds --load-max-rounds asks: a load section
// past them was not written by the gate.
const (
	MaxStreams    = judge.MaxStreams
	MaxLoadRounds = 99
)

// maxRangeListed is how many fields out of range an error names.
const maxRangeListed = 5

// outOfRange is the error for the file at path holding the fields bad, out
// of the range the gate writes them in.
func outOfRange(path string, bad []string) error {
	return fmt.Errorf("%s: %s; it is not a file the gate wrote, refused", path, listed(bad, maxRangeListed))
}

// ranges gathers what is out of range in a run's file: a count, a time or a
// size below 0, a window that ends before it starts, load settings the gate
// never asks. An artifact is anyone's to edit, and the judge believes its
// figures: a negative token count is a negative energy a token, under any
// ceiling.
type ranges struct{ bad []string }

func (g *ranges) add(format string, args ...any) { g.bad = append(g.bad, fmt.Sprintf(format, args...)) }

// count and ms check a count and a time (or a size) for 0 or more.
func (g *ranges) count(field string, n int) {
	if n < 0 {
		g.add("%s is %d, below 0", field, n)
	}
}

func (g *ranges) ms(field string, v float64) {
	if v < 0 {
		g.add("%s is %v, below 0", field, v)
	}
}

func (g *ranges) optCount(field string, n *int) {
	if n != nil {
		g.count(field, *n)
	}
}

func (g *ranges) optMS(field string, v *float64) {
	if v != nil {
		g.ms(field, *v)
	}
}

// field is name under prefix: "replies[3].chunks", or "chunks" in a reply's
// own file.
func field(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// reply checks one reply's counts and times.
func (g *ranges) reply(p string, r *measure.Reply) {
	g.count(field(p, "max_tokens"), r.MaxTokens)
	g.optMS(field(p, "first_ms"), r.FirstMS)
	g.optMS(field(p, "last_ms"), r.LastMS)
	if r.FirstMS != nil && r.LastMS != nil && *r.LastMS < *r.FirstMS {
		g.add("%s is %v, before %s %v", field(p, "last_ms"), *r.LastMS, field(p, "first_ms"), *r.FirstMS)
	}
	g.ms(field(p, "end_ms"), r.EndMS)
	for i, a := range r.Arrivals {
		g.ms(field(p, fmt.Sprintf("arrivals[%d].ms", i)), a.MS)
		g.count(field(p, fmt.Sprintf("arrivals[%d].chunks", i)), a.Chunks)
	}
	g.count(field(p, "chunks"), r.Chunks)
	g.optCount(field(p, "completion_tokens"), r.CompletionTokens)
	g.optCount(field(p, "prompt_tokens"), r.PromptTokens)
	g.optCount(field(p, "cached_tokens"), r.CachedTokens)
	g.count(field(p, "top_logprobs"), r.TopLogprobs)
	if s := r.Server; s != nil {
		g.count(field(p, "server.predicted_n"), s.PredictedN)
		g.ms(field(p, "server.predicted_ms"), s.PredictedMS)
		g.ms(field(p, "server.predicted_per_second"), s.PredictedPerSecond)
		g.optCount(field(p, "server.prompt_n"), s.PromptN)
		g.ms(field(p, "server.prompt_ms"), s.PromptMS)
		g.optCount(field(p, "server.cache_n"), s.CacheN)
		g.count(field(p, "server.decode_steps"), s.DecodeSteps)
		g.ms(field(p, "server.decode_ms"), s.DecodeMS)
	}
}

// load checks the load section: the settings the gate asks (--load 2 to
// MaxStreams, --load-expect, --load-efficiency, --load-first-token-ms,
// --load-max-rounds), rounds of that many streams and no more of them than
// asked, and each round's replies.
func (g *ranges) load(lr *judge.LoadRun) {
	if lr == nil {
		return
	}
	l := lr.Limits
	if l.Streams < 2 || l.Streams > MaxStreams {
		g.add("load.limits.streams is %d, not 2 to %d", l.Streams, MaxStreams)
	}
	if l.Expect != judge.LoadBatch && l.Expect != judge.LoadSerial {
		g.add("load.limits.expect is %q, not %s or %s", l.Expect, judge.LoadBatch, judge.LoadSerial)
	}
	if !(l.Efficiency > 0 && l.Efficiency <= 1) {
		g.add("load.limits.efficiency is %v, not above 0 and at most 1", l.Efficiency)
	}
	if !(l.FirstTokenMS > 0) {
		g.add("load.limits.first_token_ms is %v, not above 0", l.FirstTokenMS)
	}
	if l.MaxRounds < 1 || l.MaxRounds > MaxLoadRounds {
		g.add("load.limits.max_rounds is %d, not 1 to %d", l.MaxRounds, MaxLoadRounds)
	}
	if len(lr.Rounds) > l.MaxRounds {
		g.add("load.rounds holds %d rounds, more than load.limits.max_rounds %d", len(lr.Rounds), l.MaxRounds)
	}
	for i, rd := range lr.Rounds {
		if len(rd) != l.Streams {
			g.add("load.rounds[%d] holds %d streams, not load.limits.streams %d", i, len(rd), l.Streams)
		}
		for j := range rd {
			g.reply(fmt.Sprintf("load.rounds[%d][%d]", i, j), &rd[j])
		}
	}
}

// energy checks the energy figures: a window, joules, watts, tokens and
// joules a token (gross) are never below 0. The net figure may be: idle
// taken off a short window.
func (g *ranges) energy(e *judge.Energy) {
	if e == nil {
		return
	}
	g.ms("energy.period_ms", e.PeriodMS)
	g.optMS("energy.window_s", e.WindowS)
	g.optMS("energy.joules", e.Joules)
	g.optMS("energy.idle_w", e.IdleW)
	g.optMS("energy.idle_before_w", e.IdleBeforeW)
	g.optMS("energy.idle_after_w", e.IdleAfterW)
	g.count("energy.tokens", e.Tokens)
	g.optMS("energy.gross_j_per_token", e.GrossJPerToken)
	for i, rd := range e.Rounds {
		p := fmt.Sprintf("energy.rounds[%d].", i)
		g.optMS(p+"window_s", rd.WindowS)
		g.optMS(p+"joules", rd.Joules)
		g.count(p+"tokens", rd.Tokens)
		g.optMS(p+"gross_j_per_token", rd.GrossJPerToken)
	}
}

// witness checks the witnesses' counts.
func (g *ranges) witness(w *route.Witness) {
	if w == nil {
		return
	}
	g.count("witness.processes", w.Processes)
	for i, u := range w.Usage {
		p := fmt.Sprintf("witness.usage[%d].", i)
		g.ms(p+"engine_ns", float64(u.EngineNS))
		g.ms(p+"span_ns", float64(u.SpanNS))
		g.ms(p+"memory_bytes", float64(u.MemoryBytes))
	}
	if m := w.Memory; m != nil {
		g.ms("witness.memory.weights_bytes", float64(m.WeightsBytes))
		if len(m.Samples) > 2 {
			g.add("witness.memory.samples holds %d samples, more than 2 (the first and the last)", len(m.Samples))
		}
		for i, s := range m.Samples {
			p := fmt.Sprintf("witness.memory.samples[%d].", i)
			g.ms(p+"bytes", float64(s.Bytes))
			if len(s.Processes) > route.MaxMemoryProcesses {
				g.add("%sprocesses holds %d, more than %d", p, len(s.Processes), route.MaxMemoryProcesses)
			}
			for j, pm := range s.Processes {
				g.count(fmt.Sprintf("%sprocesses[%d].pid", p, j), pm.PID)
				g.ms(fmt.Sprintf("%sprocesses[%d].bytes", p, j), float64(pm.Bytes))
			}
		}
	}
}

// rangeErrors is every field of r out of range, each named by its path
// in result.json.
func (r *Result) rangeErrors() []string {
	var g ranges
	for i := range r.Replies {
		g.reply(fmt.Sprintf("replies[%d]", i), &r.Replies[i])
	}
	for i := range r.Warmups {
		g.reply(fmt.Sprintf("warmups[%d]", i), &r.Warmups[i])
	}
	g.count("run.replies", r.Run.Replies)
	g.count("run.warmup", r.Run.Warmup)
	g.count("run.max_tokens", r.Run.MaxTokens)
	g.count("extra.replies", r.Extra.Replies)
	g.count("extra.max", r.Extra.Max)
	s := &r.Serve
	if s.Port < 0 || s.Port > 65535 {
		g.add("serve.port is %d, not 0 to 65535", s.Port)
	}
	g.count("serve.pid", s.PID)
	g.ms("serve.ready_ms", s.ReadyMS)
	g.ms("serve.stop_ms", s.StopMS)
	g.count("serve.swept", s.Swept)
	g.count("serve.survivors", s.Survivors)
	g.ms("serve.log_bytes", float64(s.LogBytes))
	g.ms("serve.log_dropped", float64(s.LogDropped))
	g.count("serve.supervisor_stopped", s.SupervisorStopped)
	g.ms("hold.waited_ms", r.Hold.WaitedMS)
	g.ms("hold.held_ms", r.Hold.HeldMS)
	g.load(r.Load)
	g.energy(r.Energy)
	g.witness(r.Witness)
	return g.bad
}

// replyRangeErrors is every field of a reply file's reply out of range.
func replyRangeErrors(r *measure.Reply) []string {
	var g ranges
	g.reply("", r)
	return g.bad
}

// listed joins the first most of xs with "; ", and counts the rest: "a; b
// and 41,203 more".
func listed(xs []string, most int) string {
	if len(xs) <= most {
		return strings.Join(xs, "; ")
	}
	return strings.Join(xs[:most], "; ") + " and " + thousands(len(xs)-most) + " more"
}

// thousands is n with its thousands separated by commas: 41,203.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
