package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// MaxLoad is the most streams --load asks at once: more is no smoke test.
// A run's directory holding rounds of more is refused (report.Read).
const MaxLoad = judge.MaxStreams

// PromptOverhead is the tokens a chat template adds around a prompt, at
// most, as the context check counts them; a prompt's own tokens are counted
// as its bytes over PromptBytesPerToken.
const (
	PromptOverhead      = 32
	PromptBytesPerToken = 4
)

// LoadFirstToken is the worst first token a batching serve's round may
// take: --load-first-token-ms, or twice --first-token-ms.
func (c *Config) LoadFirstToken() float64 {
	if c.LoadFirstTokenMS > 0 {
		return c.LoadFirstTokenMS
	}
	return 2 * c.FirstTokenMS
}

// LoadLimits are the load assertion's limits; Streams 0 when --load is off.
func (c *Config) LoadLimits() judge.LoadLimits {
	expect := c.LoadExpect
	if expect == "" {
		expect = judge.LoadBatch
	}
	return judge.LoadLimits{Streams: c.Load, Expect: expect, Efficiency: c.LoadFloor(), FirstTokenMS: c.LoadFirstToken(), MaxRounds: c.LoadMaxRounds}
}

// LoadFloor is the least η of a batching serve's round: --load-efficiency,
// or the default for --load N (judge.DefaultEfficiency: 0.5, and 0.65 at
// --load 2, above the 1/2 of a serve that time-slices).
func (c *Config) LoadFloor() float64 {
	if c.LoadEfficiency != 0 || c.Load == 0 {
		// With no --load, 0 leaves the default to the streams a run's
		// rounds hold (evidence.Trust).
		return c.LoadEfficiency
	}
	return judge.DefaultEfficiency(c.Load)
}

// SlicedFloor says why --load-efficiency e cannot judge n streams, or "":
// at or below 1/n it cannot tell a serve that time-slices one device
// between the streams (η = 1/n) from one that batches.
func SlicedFloor(e float64, n int) string {
	sliced := judge.Sliced(n)
	if e > sliced {
		return ""
	}
	def := judge.DefaultEfficiency(n)
	return fmt.Sprintf("--load-efficiency %v at --load %d: a serve that time-slices one device between %d streams decodes them at η 1/%d = %.4g, so a floor at or below it cannot tell time-slicing from batching; pass %.2f or more (the default at --load %d, %.2f, is %.0f%% above 1/%d), leave it out, or ask more streams",
		e, n, n, n, sliced, judge.LeastFloor(n), n, def, (def/sliced-1)*100, n)
}

// checkLoad checks --load and its settings, and, where the serve's words
// (or the environment it inherits) say how many requests it was started to
// decode at once, that --load does not ask more of a batching serve.
func (c *Config) checkLoad(p *Plan) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Load == 0 {
		return nil
	}
	if c.Load < 2 || c.Load > MaxLoad {
		bad("--load %d: pass 0 (off) or 2 to %d streams at once", c.Load, MaxLoad)
		return errs
	}
	if c.Kind == report.KindReference {
		bad("--load %d: record makes a reference, whose figures are recorded, not judged; leave --load out", c.Load)
	}
	if c.LoadExpect != "" && c.LoadExpect != judge.LoadBatch && c.LoadExpect != judge.LoadSerial {
		bad("--load-expect %q: pass batch (the serve decodes the streams together) or serial (it takes one request at a time)", c.LoadExpect)
	}
	if e := c.LoadEfficiency; e != 0 && !(e > 0 && e <= 1) {
		bad("--load-efficiency %v: pass a fraction above 0 and at most 1 of N single streams' rate, e.g. %.2f, the default at --load %d, or 0 for it", e, judge.DefaultEfficiency(c.Load), c.Load)
	} else if why := SlicedFloor(e, c.Load); e != 0 && why != "" && c.LoadExpect != judge.LoadSerial {
		errs = append(errs, errors.New(why))
	}
	if !(c.LoadFirstTokenMS >= 0) || math.IsInf(c.LoadFirstTokenMS, 0) {
		bad("--load-first-token-ms %v: pass a positive number of milliseconds, or 0 for twice --first-token-ms", c.LoadFirstTokenMS)
	}
	if c.LoadMaxRounds < 1 || c.LoadMaxRounds%2 == 0 || c.LoadMaxRounds > report.MaxLoadRounds {
		bad("--load-max-rounds %d: pass an odd number from 1 to %d (at the cap the median round decides; an even count can tie), e.g. 11", c.LoadMaxRounds, report.MaxLoadRounds)
	}
	if len(p.Argv) == 0 {
		return errs
	}
	slots, where := ServeSlots(c.Preset, p.Argv, os.Getenv)
	if slots > 0 && c.Load > slots && c.LoadExpect != judge.LoadSerial {
		bad("--load %d is above what the serve was started for: %s; pass --load %d or less, start the serve for %d, or --load-expect serial if it is meant to queue them",
			c.Load, where, slots, c.Load)
	}
	if ctx, ok := wordValue(p.Argv, "-c", "--ctx-size"); ok && isLlamaServer(c.Preset, p.Argv) {
		n, _ := strconv.Atoi(ctx)
		if slots < 1 {
			slots = 1
		}
		need := c.MaxTokens + PromptOverhead + longestPrompt(p)/PromptBytesPerToken
		if n > 0 && n/slots < need {
			bad("--serve: --ctx-size %d shared among %d slot(s) leaves %d tokens a request, fewer than --max-tokens %d and the longest prompt (about %d tokens): llama-server divides --ctx-size among its slots; pass --ctx-size %d or more",
				n, slots, n/slots, c.MaxTokens, need-c.MaxTokens, need*slots)
		}
	}
	return errs
}

// ServeSlots is how many requests the serve was started to decode at once,
// where its words or its environment say so, and where that was read; 0
// when they do not: llama-server's -np (--parallel), vLLM's --max-num-seqs,
// Ollama's OLLAMA_NUM_PARALLEL (in an env word of --serve, or the gate's
// own environment, which the serve inherits).
func ServeSlots(preset string, argv []string, getenv func(string) string) (int, string) {
	if v, ok := wordValue(argv, "-np", "--parallel"); ok && isLlamaServer(preset, argv) {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n, fmt.Sprintf("-np %d in --serve (llama-server's slots)", n)
		}
	}
	if v, ok := wordValue(argv, "--max-num-seqs"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n, fmt.Sprintf("--max-num-seqs %d in --serve (vLLM's sequences at once)", n)
		}
	}
	if preset == "ollama" || slicesHasBase(argv, "ollama") {
		v, where := "", ""
		for _, w := range argv {
			if val, ok := strings.CutPrefix(w, "OLLAMA_NUM_PARALLEL="); ok {
				v, where = val, "in --serve"
			}
		}
		if where == "" {
			v, where = getenv("OLLAMA_NUM_PARALLEL"), "in the environment the serve inherits"
		}
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return n, fmt.Sprintf("OLLAMA_NUM_PARALLEL=%d %s (Ollama's requests at once)", n, where)
		}
	}
	return 0, ""
}

// wordValue is the value of the first of names among argv: "-np 4" or
// "-np=4".
func wordValue(argv []string, names ...string) (string, bool) {
	for i, w := range argv {
		for _, name := range names {
			if w == name && i+1 < len(argv) {
				return argv[i+1], true
			}
			if v, ok := strings.CutPrefix(w, name+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

func isLlamaServer(preset string, argv []string) bool {
	return preset == "llama.cpp" || slicesHasBase(argv, "llama-server")
}

func slicesHasBase(argv []string, name string) bool {
	for _, w := range argv {
		if filepath.Base(w) == name {
			return true
		}
	}
	return false
}

// longestPrompt is the longest prompt's bytes, with the load's salt.
func longestPrompt(p *Plan) int {
	n := 0
	for _, pr := range p.Prompts {
		n = max(n, len(pr.Prompt))
	}
	return n + 64
}
