// Package prompts gives the questions the gate asks: a built-in set, or a
// file of one prompt a line (plain text, or JSON with "prompt" and an optional
// "expect" RE2 pattern).
package prompts

import (
	"bufio"
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Prompt is one question and, optionally, a pattern its answer must match.
type Prompt struct {
	Prompt string `json:"prompt"`
	Expect string `json:"expect,omitempty"`
}

// Builtin is the default set: five questions whose answers run longer than
// the default max-tokens, so every reply decodes for its whole budget and the
// rate is measured over the same span each time. Each starts with a word of
// its own, so a serve's prompt cache shares no more than the chat template's
// opening between them.
func Builtin() []Prompt {
	return []Prompt{
		{Prompt: "Explain in detail how a CPU cache works: the levels, lines, associativity, and what happens on a miss. Give examples."},
		{Prompt: "Write a long story about a lighthouse keeper who finds a message in a bottle. Describe the sea, the weather and the keeper's days."},
		{Prompt: "Describe the history of the Roman Empire from its founding to the fall of Constantinople, century by century."},
		{Prompt: "List twenty common Linux shell commands and explain each one with an example of its use."},
		{Prompt: "Bake a loaf of sourdough bread with me step by step, from feeding the starter to cooling the loaf."},
	}
}

// warmup is the warm-up request's question: none of the built-in ones, and
// unlike them from its first word.
const warmup = "Warm-up request: count from one to twenty in words, then name the seasons of the year."

// Warmup is the warm-up request's prompt: none of the judged prompts ps, so
// no judged reply finds its prompt in the serve's cache.
func Warmup(ps []Prompt) Prompt {
	w := warmup
	for slices.ContainsFunc(ps, func(p Prompt) bool { return p.Prompt == w }) {
		w += " Again."
	}
	return Prompt{Prompt: w}
}

// Asked is prompt i of ps (from 0) as round r (from 1) of a run asks it:
// its own words in the first round, unless an earlier line of the file
// asks the same; otherwise "Request r.j: ..." with j = i+1. The words are a
// function of the prompt and the round alone, never of the order the run
// asks them in, so the k-th asking of a prompt reads the same in every run
// (a reference's reply to it can be found by its words), and each request
// differs from every earlier one from its first words: a serve's prompt
// cache (llama-server reuses the longest common prefix with a cached prompt)
// then holds no more than the chat template's opening, and the first token
// pays for the prompt.
func Asked(ps []Prompt, i, round int) Prompt {
	p := ps[i]
	if round > 1 || slices.ContainsFunc(ps[:i], func(q Prompt) bool { return q.Prompt == p.Prompt }) {
		p.Prompt = "Request " + strconv.Itoa(round) + "." + strconv.Itoa(i+1) + ": " + p.Prompt
	}
	return p
}

// Order is the order a run asks its prompts in: round after round, each
// round every prompt once, in an order drawn afresh from the run's seed. The
// replies are then exchangeable: a run that stops after three replies has
// judged three prompts drawn at random, not the file's first three, whose
// answers may be shorter or longer than the rest.
type Order struct {
	ps   []Prompt
	seed uint64
}

// NewOrder is the order of ps drawn from seed.
func NewOrder(ps []Prompt, seed uint64) Order { return Order{ps: ps, seed: seed} }

// Request is the prompt of judged request n (from 1).
func (o Order) Request(n int) Prompt {
	round := (n-1)/len(o.ps) + 1
	return Asked(o.ps, o.Round(round)[(n-1)%len(o.ps)], round)
}

// Round is the order of round r (from 1): the prompts' indexes in ps, a
// Fisher-Yates shuffle driven by PCG seeded with the run's seed and r.
// Both algorithms are fixed, so a seed gives the same order in every
// version.
func (o Order) Round(r int) []int {
	idx := make([]int, len(o.ps))
	for i := range idx {
		idx[i] = i
	}
	g := rand.NewPCG(o.seed, uint64(r))
	for i := len(idx) - 1; i > 0; i-- {
		// The modulo's bias is below 2^-32 for any file of prompts.
		j := int(g.Uint64() % uint64(i+1))
		idx[i], idx[j] = idx[j], idx[i]
	}
	return idx
}

// MaxSeed is the largest seed: 2^53 - 1, so every JSON reader reads a seed
// in result.json exactly.
const MaxSeed = 1<<53 - 1

// NewSeed draws a seed from crypto/rand.
func NewSeed() uint64 {
	var b [8]byte
	crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) & MaxSeed
}

// Load reads a prompts file: a regular file, opened without blocking (a FIFO
// or a device is refused, never waited on).
func Load(path string) ([]Prompt, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %v; pass a readable file of one prompt a line", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		what := "its type cannot be read"
		if err == nil {
			what = fmt.Sprintf("a %v", fi.Mode().Type())
		}
		return nil, fmt.Errorf("--prompts %s is not a regular file (%s); pass a file of one prompt a line", path, what)
	}
	ps, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("--prompts %s: %w", path, err)
	}
	return ps, nil
}

// Parse reads prompts, one a line. A line that starts with "{" is JSON with
// "prompt" and an optional "expect"; blank lines and lines that start with
// "#" are skipped.
func Parse(r io.Reader) ([]Prompt, error) {
	var ps []Prompt
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if n == 1 {
			// A byte order mark, as some Windows editors write, is not part
			// of the first prompt: with it a JSON line would read as text.
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		line := strings.TrimSpace(text)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := Prompt{Prompt: line}
		if strings.HasPrefix(line, "{") {
			p = Prompt{}
			dec := json.NewDecoder(bytes.NewReader([]byte(line)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				errs = append(errs, fmt.Errorf("line %d: not a JSON prompt (%v); write {\"prompt\": \"...\", \"expect\": \"...\"}", n, err))
				continue
			}
			if rest := strings.TrimSpace(line[dec.InputOffset():]); rest != "" {
				errs = append(errs, fmt.Errorf("line %d: %q follows the JSON prompt; write one JSON object a line, and nothing after it", n, cut(rest, 40)))
				continue
			}
			if strings.TrimSpace(p.Prompt) == "" {
				errs = append(errs, fmt.Errorf("line %d: \"prompt\" is empty", n))
				continue
			}
		}
		if p.Expect != "" {
			if _, err := regexp.Compile(p.Expect); err != nil {
				errs = append(errs, fmt.Errorf("line %d: expect %q is not a valid RE2 pattern: %v", n, p.Expect, err))
				continue
			}
		}
		ps = append(ps, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(ps) == 0 {
		return nil, errors.New("no prompts in it; write one prompt a line")
	}
	return ps, nil
}

// cut shortens s to at most n runes for a message.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
