// Package corpus_test judges the corpus of real start-up logs (../testdata/corpus)
// through the presets, the log scanner and the judge, as a run does. It is
// a package of its own so that the judge's mutation testing builds the
// judge alone for each mutant, not the presets and the scanner that import it.
package corpus_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/logscan"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// The corpus: start-up logs that users pasted into public issue threads of
// the serves' own repositories, one file each under testdata/corpus/PRESET/.
// Each file starts with its source (the thread), its truth ("fast" or
// "slow", as the thread's people and the log itself state it, never from
// the gate) and why, then a line "---", then the log excerpt as pasted:
// lines trimmed around it, none edited.

// corpusMisses are the logs whose verdict is known to differ from their
// truth, each with its cause. A miss not listed fails the test, and so does
// a listed one that no longer misses.
var corpusMisses = map[string]string{
	"llama.cpp/beellama-157-default-verbosity": "llama-server at its default verbosity (3) prints no load line at all: neither route, with the -lv 4 hint in a run",
	"lemonade/pr3167-flm-recipe-start":         "the excerpt ends as Lemonade starts flm serve, before it says FastFlowLM is ready",
	"ovms/3557-phi4-npu-failed":                "the excerpt ends before the failure; OVMS's DEBUG dump of the CPU plugin's own configuration (EXECUTION_DEVICES: CPU) says nothing of where the model runs",
	"vllm-ascend/13346-mla-full-decode-only":   "the excerpt ends before the capture: a graph mode set and graph memory profiled are a plan, not a capture",
}

type corpusLog struct {
	preset, name, source, truth string
	log                         []byte
}

func readCorpus(t *testing.T) []corpusLog {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "corpus", "*", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var logs []corpusLog
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		head, log, ok := bytes.Cut(b, []byte("\n---\n"))
		if !ok {
			t.Fatalf("%s: no line \"---\" between its header and its log", p)
		}
		c := corpusLog{preset: filepath.Base(filepath.Dir(p)), name: strings.TrimSuffix(filepath.Base(p), ".log"), log: log}
		for line := range strings.SplitSeq(string(head), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "source":
				c.source = v
			case "truth":
				c.truth = v
			}
		}
		if c.source == "" || (c.truth != "fast" && c.truth != "slow") {
			t.Fatalf("%s: the header names no source, or a truth other than fast or slow", p)
		}
		if _, ok := config.Presets[c.preset]; !ok {
			t.Fatalf("%s: %q is no preset", p, c.preset)
		}
		logs = append(logs, c)
	}
	return logs
}

// corpusReplies is one reply, so that the route is judged on its evidence
// rather than on there being no replies.
var corpusReplies = []measure.Reply{{N: 1}}

// corpusVerdict judges a log as a run of its preset does: the preset's rules
// on the log as the serve's output is read, then the route assertion.
func corpusVerdict(t *testing.T, preset string, log []byte) (named string, a judge.Assertion) {
	t.Helper()
	p := config.Presets[preset]
	m, err := route.NewMatcher(p.FastRoute, p.SlowRoute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := logscan.Scan(bytes.NewReader(log), m)
	if err != nil {
		t.Fatal(err)
	}
	v := judge.Judge(judge.Input{Route: res.Route, Replies: corpusReplies})
	i := slices.IndexFunc(v.Assertions, func(a judge.Assertion) bool { return a.Name == judge.Route })
	a = v.Assertions[i]
	switch {
	case a.OK:
		return "fast", a
	case res.Route.Slow != nil:
		return "slow", a
	}
	return "neither", a
}

func TestCorpus(t *testing.T) {
	logs := readCorpus(t)
	if len(logs) < 40 {
		t.Errorf("the corpus holds %d logs; it needs at least 40", len(logs))
	}
	type tally struct{ n, agree, fastFailed, slowPassed int }
	by := map[string]*tally{}
	all := &tally{}
	seen := map[string]bool{}
	for _, c := range logs {
		key := c.preset + "/" + c.name
		seen[key] = true
		named, a := corpusVerdict(t, c.preset, c.log)
		tl := by[c.preset]
		if tl == nil {
			tl = &tally{}
			by[c.preset] = tl
		}
		for _, x := range []*tally{tl, all} {
			x.n++
			if named == c.truth {
				x.agree++
			}
			if c.truth == "fast" && !a.OK {
				x.fastFailed++
			}
			if c.truth == "slow" && a.OK {
				x.slowPassed++
			}
		}
		cause, known := corpusMisses[key]
		switch {
		case named != c.truth && !known:
			t.Errorf("%s (%s): the gate names %s, the truth is %s: %s", key, c.source, named, c.truth, a.Detail)
		case named == c.truth && known:
			t.Errorf("%s (%s): listed as a known miss (%s), but the gate now names %s, its truth", key, c.source, cause, named)
		}
	}
	for key := range corpusMisses {
		if !seen[key] {
			t.Errorf("known miss %s: no such log in the corpus", key)
		}
	}
	presets := make([]string, 0, len(by))
	for p := range by {
		presets = append(presets, p)
	}
	slices.Sort(presets)
	for _, p := range presets {
		t.Log(agreement(p, by[p].n, by[p].agree, by[p].fastFailed, by[p].slowPassed))
	}
	t.Log(agreement("all", all.n, all.agree, all.fastFailed, all.slowPassed))
}

func agreement(name string, n, agree, fastFailed, slowPassed int) string {
	return fmt.Sprintf("%-12s %2d of %2d (%3.0f%%) named rightly; %d fast serve(s) failed, %d slow serve(s) passed",
		name, agree, n, 100*float64(agree)/float64(n), fastFailed, slowPassed)
}
