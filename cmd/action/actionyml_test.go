package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// action.yml and the flags must agree: every flag of the gate is an input of
// the same name, mapped to INPUT_<NAME> in the step that runs the gate
// (composite steps get no INPUT_* by themselves).
func TestActionYMLMatchesFlags(t *testing.T) {
	b, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	inputsBlock := text[strings.Index(text, "\ninputs:\n"):strings.Index(text, "\noutputs:\n")]
	var inputs []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z0-9-]+):$`).FindAllStringSubmatch(inputsBlock, -1) {
		if m[1] == "action-repository" || m[1] == "action-ref" {
			continue // the action's own origin, for its release binaries: not flags
		}
		inputs = append(inputs, m[1])
	}
	for _, origin := range []string{
		"default: '${{ github.action_repository }}'", "default: '${{ github.action_ref }}'",
		"ACTION_REPOSITORY: ${{ inputs.action-repository }}", "ACTION_REF: ${{ inputs.action-ref }}",
	} {
		if !strings.Contains(text, origin) {
			t.Errorf("action.yml lacks %q: composite steps cannot read github.action_* themselves", origin)
		}
	}
	var mapped []string
	for _, m := range regexp.MustCompile(`(?m)^        INPUT_([A-Z0-9-]+): \$\{\{ inputs\.([a-z0-9-]+) \}\}$`).FindAllStringSubmatch(text, -1) {
		if strings.ToLower(m[1]) != m[2] {
			t.Errorf("INPUT_%s is mapped from inputs.%s", m[1], m[2])
		}
		mapped = append(mapped, m[2])
	}
	c := config.Default()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	runFlags(fs, &c)
	var flags []string
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })

	slices.Sort(inputs)
	slices.Sort(mapped)
	if diff := cmp.Diff(flags, inputs); diff != "" {
		t.Errorf("action.yml inputs (-flags +inputs):\n%s", diff)
	}
	if diff := cmp.Diff(flags, mapped); diff != "" {
		t.Errorf("INPUT_* mapped in the gate step (-flags +mapped):\n%s", diff)
	}
	if !strings.Contains(text, `run: exec "$NPU_SERVE_SMOKE" run`) {
		t.Error("the gate step does not exec the binary: bash would swallow the runner's cancel signals")
	}
	// Every output the gate sets, mapped.
	for out := range publish.Outputs(&report.Result{}, "", 0) {
		if !strings.Contains(text, "value: ${{ steps.gate.outputs."+out+" }}") {
			t.Errorf("output %s is not mapped from the gate step", out)
		}
	}
}

func TestFromInputs(t *testing.T) {
	env := map[string]string{
		"INPUT_SERVE":          "llama-server --port {port}",
		"INPUT_FIRST-TOKEN-MS": "450",
		"INPUT_FAST-ROUTE":     "one\n\n  two  \n",
		"INPUT_REPLIES":        "",
		"INPUT_PR-NUMBER":      "12",
		"INPUT_ORDER-SEED":     "42",
		"INPUT_GITHUB-TOKEN":   "ghs_input",
	}
	c := config.Default()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	runFlags(fs, &c)
	a := newAction(func(k string) string { return env[k] }, io.Discard)
	if err := fromInputs(fs, a); err != nil {
		t.Fatal(err)
	}
	if c.Serve != "llama-server --port {port}" || c.FirstTokenMS != 450 || c.Replies != config.Default().Replies || c.PRNumber != 12 {
		t.Errorf("fromInputs() config = serve %q, first-token %v, replies %d, pr %d", c.Serve, c.FirstTokenMS, c.Replies, c.PRNumber)
	}
	// The token's input is an environment variable, not the command line:
	// taken, not refused.
	if c.GitHubToken != "ghs_input" {
		t.Errorf("fromInputs() token = %q, want the input's", c.GitHubToken)
	}
	if err := refused(fs); err != nil {
		t.Errorf("refused() after the token's input = %v, want nil", err)
	}
	if c.OrderSeed == nil || *c.OrderSeed != 42 {
		t.Errorf("fromInputs() order seed = %v, want 42", c.OrderSeed)
	}
	if diff := cmp.Diff([]string{"one", "two"}, c.FastRoute); diff != "" {
		t.Errorf("fast-route from a multi-line input (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"per-op forward"}, c.SlowRoute); diff != "" {
		t.Errorf("slow-route without an input keeps its default (-want +got):\n%s", diff)
	}

	if c := config.Default(); c.OrderSeed != nil {
		t.Errorf("the default order seed = %d, want none (drawn at the run)", *c.OrderSeed)
	}

	env = map[string]string{"INPUT_FLOOR": "fast", "INPUT_REPLIES": "many", "INPUT_ORDER-SEED": "-1"}
	c = config.Default()
	fs = flag.NewFlagSet("run", flag.ContinueOnError)
	runFlags(fs, &c)
	err := fromInputs(fs, newAction(func(k string) string { return env[k] }, io.Discard))
	if err == nil || !strings.Contains(err.Error(), "input floor") || !strings.Contains(err.Error(), "input replies") || !strings.Contains(err.Error(), `input order-seed: "-1" is not a seed; pass a whole number from 0 to 2^53 - 1`) {
		t.Errorf("fromInputs() with bad numbers = %v, want both named", err)
	}
}
