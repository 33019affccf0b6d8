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
	for _, m := range regexp.MustCompile(`(?m)^        INPUT_([A-Z0-9-]+): \$\{\{ inputs\.([a-z0-9-]+) \}\}$`).FindAllStringSubmatch(actionSteps(t, text)["gate"], -1) {
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
	// Every output the gate sets, mapped from the gate step of either
	// system (the other is skipped, its outputs empty).
	for out := range publish.Outputs(&report.Result{}, "", 0) {
		if !strings.Contains(text, "value: ${{ steps.gate.outputs."+out+" || steps.gate-windows.outputs."+out+" }}") {
			t.Errorf("output %s is not mapped from the gate steps", out)
		}
	}
}

// actionSteps is action.yml's steps by id, each its text from its "- id:"
// line to the next step's.
func actionSteps(t *testing.T, text string) map[string]string {
	t.Helper()
	i := strings.Index(text, "\n  steps:\n")
	if i < 0 {
		t.Fatal("action.yml has no steps")
	}
	steps := map[string]string{}
	parts := strings.Split(text[i:], "\n    - id: ")
	for _, p := range parts[1:] {
		id, _, _ := strings.Cut(p, "\n")
		// A comment above the next step belongs to it, not to this one.
		body := regexp.MustCompile(`(?s)\n    #.*$`).ReplaceAllString(p, "")
		steps[id] = "    - id: " + body + "\n"
	}
	return steps
}

// stepField is a step's one-line field NAME's value ("" where it has none).
func stepField(step, name string) string {
	m := regexp.MustCompile(`(?m)^      ` + regexp.QuoteMeta(name) + `: (.*)$`).FindStringSubmatch(step)
	if m == nil {
		return ""
	}
	return m[1]
}

// stepEnv is a step's env: lines, NAME: VALUE each.
func stepEnv(step string) []string {
	_, after, ok := strings.Cut(step, "\n      env:\n")
	if !ok {
		return nil
	}
	var env []string
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "        ") {
			break
		}
		env = append(env, strings.TrimSpace(line))
	}
	return env
}

// stepRun is a step's script: its run: line, or its run: | block.
func stepRun(step string) string {
	_, after, ok := strings.Cut(step, "\n      run: ")
	if !ok {
		return ""
	}
	if !strings.HasPrefix(after, "|\n") {
		line, _, _ := strings.Cut(after, "\n")
		return line
	}
	var lines []string
	for _, line := range strings.Split(after[2:], "\n") {
		if !strings.HasPrefix(line, "        ") && line != "" {
			break
		}
		lines = append(lines, strings.TrimPrefix(line, "        "))
	}
	return strings.TrimSpace(strings.Join(lines, "\n")) + "\n"
}

const windowsShell = `powershell -NoProfile -ExecutionPolicy Bypass -Command ". '{0}'"`

// On a Windows runner the action runs the same two steps in Windows
// PowerShell: the binary (gate-binary.ps1), then the gate, with the
// Linux gate step's environment to the line, the binary from the Windows
// step; each pair runs on its own system only.
func TestActionYMLWindowsSteps(t *testing.T) {
	b, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	steps := actionSteps(t, string(b))
	var ids []string
	for id := range steps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"build", "build-windows", "gate", "gate-windows"}, ids); diff != "" {
		t.Fatalf("action.yml's steps (-want +got):\n%s", diff)
	}
	if !(strings.Index(string(b), "- id: build-windows") < strings.Index(string(b), "- id: gate-windows")) {
		t.Error("the Windows gate step runs before the step that gives its binary")
	}
	for _, c := range []struct{ id, cond, shell string }{
		{"build", "runner.os != 'Windows'", "bash"},
		{"gate", "runner.os != 'Windows'", "bash"},
		{"build-windows", "runner.os == 'Windows'", windowsShell},
		{"gate-windows", "runner.os == 'Windows'", windowsShell},
	} {
		if got := stepField(steps[c.id], "if"); got != c.cond {
			t.Errorf("step %s: if: %q, want %q", c.id, got, c.cond)
		}
		if got := stepField(steps[c.id], "shell"); got != c.shell {
			t.Errorf("step %s: shell: %q, want %q", c.id, got, c.shell)
		}
		// An input reaches a script through env:, never written into it
		// (a serve line with quotes or $() would be code there).
		if run := stepRun(steps[c.id]); run == "" || strings.Contains(run, "${{") {
			t.Errorf("step %s's script is empty or interpolates an expression:\n%s", c.id, run)
		}
	}

	// The same environment for the same step of either system.
	if diff := cmp.Diff(stepEnv(steps["build"]), stepEnv(steps["build-windows"])); diff != "" {
		t.Errorf("build-windows's env (-build +build-windows):\n%s", diff)
	}
	linux, windows := stepEnv(steps["gate"]), stepEnv(steps["gate-windows"])
	if len(linux) < 50 {
		t.Fatalf("the gate step's env has %d lines, want every input's", len(linux))
	}
	for i, kv := range linux {
		if kv == "NPU_SERVE_SMOKE: ${{ steps.build.outputs.bin }}" {
			linux[i] = "NPU_SERVE_SMOKE: ${{ steps.build-windows.outputs.bin }}"
		}
	}
	if diff := cmp.Diff(linux, windows); diff != "" {
		t.Errorf("gate-windows's env, with the binary of build-windows (-gate +gate-windows):\n%s", diff)
	}

	if got, want := stepRun(steps["build-windows"]), "& (Join-Path $env:ACTION_PATH 'gate-binary.ps1')\nexit $LASTEXITCODE\n"; got != want {
		t.Errorf("build-windows runs %q, want %q", got, want)
	}
	// The gate a process of its own that PowerShell waits for, its exit
	// code the step's: never started with & (PowerShell's stop on the
	// runner's Ctrl+C would kill it before it stops the serve).
	run := stepRun(steps["gate-windows"])
	for _, want := range []string{
		"$start.FileName = $env:NPU_SERVE_SMOKE\n", "$start.Arguments = 'run'\n", "$start.UseShellExecute = $false\n",
		"$gate = [System.Diagnostics.Process]::Start($start)\n$gate.WaitForExit()\nexit $gate.ExitCode\n",
	} {
		if !strings.Contains(run, want) {
			t.Errorf("gate-windows's script lacks %q:\n%s", want, run)
		}
	}
	if strings.Contains(run, "&") {
		t.Errorf("gate-windows's script runs something with &:\n%s", run)
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
