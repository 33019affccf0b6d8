package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
)

// The fleet workflow as runners run it: nektos/act in host mode runs
// .github/workflows/release-gate-matrix.yml itself, with only what this
// machine cannot have replaced: the matrix is three jobs of the simulated
// serve (2 devices × 2 models, one pair excluded; sim-4B decodes below its
// floor), each job holding its own device's ticket, and the serve built
// from this tree instead of llama.cpp. actions/upload-artifact and
// download-artifact stand replaced by local actions that keep artifacts in
// a directory as the real ones do on GitHub (download: each artifact
// matching the pattern in PATH/NAME); checkout and setup-go by a no-op.
func TestMatrixUnderAct(t *testing.T) {
	act := actPath(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	copyTree(t, root, tree)
	wf := filepath.Join(tree, ".github/workflows/release-gate-matrix.yml")
	b, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	// The simulated serve stands in for llama-server and holds no device:
	// its runs read the log alone (witness: off), and so does the merge,
	// which weighs witnesses with its own settings, never an artifact's.
	for _, r := range [][2]string{
		{`matrix={"device": ["npu", "igpu"], "model": ["Qwen3-0.6B", "Qwen3-4B", "Qwen3-8B"], "include": [{"model": "Qwen3-0.6B", "file": "Qwen3-0.6B-Q8_0.gguf", "floor": 60}, {"model": "Qwen3-4B", "file": "Qwen3-4B-Q8_0.gguf", "floor": 25}, {"model": "Qwen3-8B", "file": "Qwen3-8B-Q4_K_M.gguf", "floor": 15}]}`,
			`matrix={"device": ["npu", "igpu"], "model": ["sim-0.6B", "sim-4B"], "exclude": [{"model": "sim-4B", "device": "igpu"}], "include": [{"model": "sim-0.6B", "file": "sim-0.6B.gguf", "floor": 60, "rate": 300}, {"model": "sim-4B", "file": "sim-4B.gguf", "floor": 25, "rate": 10}]}`},
		{"run: |\n          cmake -B build -DCMAKE_BUILD_TYPE=Release\n          cmake --build build --target llama-server -j\n",
			"run: go build -o \"$RUNNER_TEMP/sim\" ./cmd/action\n"},
		{"serve: ./build/bin/llama-server -m {model} --host 127.0.0.1 --port {port} -ngl 99 --jinja -lv 4\n",
			"serve: ${{ runner.temp }}/sim fakellm --persona llama.cpp --port {port} --model {model} --first-token-ms 0 --rate ${{ matrix.rate }}\n          replies: 2\n          max-tokens: 6\n          witness: off\n"},
		{"--preset llama.cpp --baseline 'github:release/**'", "--preset llama.cpp --witness off --baseline 'github:release/**'"},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("release-gate-matrix.yml no longer holds %q; keep this test's stand-ins in step with it", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	write(t, wf, text)

	noop := filepath.Join(dir, "noop")
	write(t, filepath.Join(noop, "action.yml"), "name: noop\ndescription: stands in for a remote action act cannot fetch offline\ninputs:\n  go-version:\n    description: ignored\nruns:\n  using: composite\n  steps:\n    - run: \"true\"\n      shell: bash\n")
	artifacts := filepath.Join(dir, "artifacts")
	upload := filepath.Join(dir, "upload")
	write(t, filepath.Join(upload, "action.yml"), `name: upload-artifact
description: keeps PATH's files as artifact NAME in $ACT_ARTIFACTS
inputs:
  name: {description: the artifact}
  path: {description: what to keep}
  overwrite: {description: replace an artifact of the name, default: 'false'}
  retention-days: {description: ignored}
runs:
  using: composite
  steps:
    - shell: bash
      env: {NAME: '${{ inputs.name }}', FROM: '${{ inputs.path }}', OVERWRITE: '${{ inputs.overwrite }}'}
      run: |
        to="$ACT_ARTIFACTS/$NAME"
        if [ -e "$to" ]; then
          [ "$OVERWRITE" = true ] || { echo "an artifact with this name already exists on the workflow run"; exit 1; }
          rm -r "$to"
        fi
        mkdir -p "$to" && cp -r "$FROM"/. "$to"/
`)
	download := filepath.Join(dir, "download")
	write(t, filepath.Join(download, "action.yml"), `name: download-artifact
description: copies each artifact of $ACT_ARTIFACTS matching PATTERN to PATH/NAME
inputs:
  pattern: {description: a glob of names}
  path: {description: where}
runs:
  using: composite
  steps:
    - shell: bash
      env: {PATTERN: '${{ inputs.pattern }}', TO: '${{ inputs.path }}'}
      run: |
        mkdir -p "$TO"
        for a in "$ACT_ARTIFACTS"/*; do
          name=$(basename "$a")
          [[ $name == $PATTERN ]] && cp -r "$a" "$TO/$name"
        done
        true
`)
	const head = "1111111111111111111111111111111111111111"
	event := filepath.Join(dir, "event.json")
	write(t, event, `{"number": 7, "pull_request": {"number": 7,
  "head": {"sha": "`+head+`", "repo": {"full_name": "acme/serve"}},
  "base": {"repo": {"full_name": "acme/serve"}}}}`)
	gh := fakegithub.New("ghs_fake")
	srv := httptest.NewServer(gh)
	defer srv.Close()

	cmd := exec.Command(act, "pull_request", "-W", wf,
		"-P", "ubuntu-latest=-self-hosted", "-P", "self-hosted=-self-hosted", "-P", "npu=-self-hosted", "-P", "igpu=-self-hosted",
		"-e", event, "-s", "GITHUB_TOKEN=ghs_fake",
		"--env", "GITHUB_API_URL="+srv.URL,
		"--env", "GITHUB_REPOSITORY=acme/serve",
		"--env", "GITHUB_WORKFLOW_REF=acme/serve/.github/workflows/release-gate-matrix.yml@refs/pull/7/merge",
		"--env", "ACT_ARTIFACTS="+artifacts,
		"--env", "NPU_HOLD_DIR="+filepath.Join(dir, "locks"),
		"--local-repository", "actions/checkout@v4="+noop,
		"--local-repository", "actions/setup-go@v5="+noop,
		"--local-repository", "actions/upload-artifact@v4="+upload,
		"--local-repository", "actions/download-artifact@v4="+download,
	)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "DOCKER_HOST=")
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err == nil {
		t.Errorf("act succeeded; want the run failed (sim-4B decodes below its floor):\n%s", tail(out, 60))
	}

	want := map[string]string{
		"npu serve smoke (sim-0.6B, npu)":  "success",
		"npu serve smoke (sim-0.6B, igpu)": "success",
		"npu serve smoke (sim-4B, npu)":    "failure",
		"npu serve smoke":                  "failure",
	}
	got := map[string]string{}
	for _, c := range gh.CheckRuns() {
		name, _ := c["name"].(string)
		if _, dup := got[name]; dup {
			t.Errorf("two check runs named %q", name)
		}
		got[name], _ = c["conclusion"].(string)
		if c["head_sha"] != head {
			t.Errorf("check run %q is on %v, want the PR head", name, c["head_sha"])
		}
		if name == "npu serve smoke" {
			if title := c["output"].(map[string]any)["title"]; title != "FAIL: 2 of 3 jobs passed (1 failed)" {
				t.Errorf("the merged check run's title = %q", title)
			}
		}
	}
	for name, conclusion := range want {
		if got[name] != conclusion {
			t.Errorf("check run %q concluded %q, want %q", name, got[name], conclusion)
		}
	}
	if len(got) != len(want) {
		t.Errorf("check runs %v, want %v:\n%s\nact said:\n%s", got, want, gh.Log(), tail(out, 80))
	}
	cs := gh.Comments(7)
	if len(cs) != 1 || !strings.HasPrefix(cs[0].Body, "<!-- npu-serve-smoke: npu serve smoke -->") {
		t.Fatalf("PR comments = %d, want the one merged comment:\n%s", len(cs), gh.Log())
	}
	for _, row := range []string{`\| sim-0\.6B \| npu \| ✅ pass \|`, `\| sim-0\.6B \| igpu \| ✅ pass \|`, `\| sim-4B \| npu \| ❌ FAIL \| \d+\.\d tok/s \(25\) \|`} {
		if !regexp.MustCompile(row).MatchString(cs[0].Body) {
			t.Errorf("the merged comment lacks a row matching %s:\n%s", row, cs[0].Body)
		}
	}
	if !strings.Contains(out, "no baseline: ") {
		t.Errorf("no job said it had no baseline (the fake holds no earlier run)")
	}
	if strings.Contains(out, "ghs_fake") {
		t.Errorf("the token was printed")
	}

	// From the last job's check run completed to the merged check run: the
	// merge job's start, its download and the report, under act.
	var lastJob, merged time.Time
	for _, c := range gh.Calls() {
		switch {
		case c.Method == "PATCH" && c.Body["status"] == "completed":
			lastJob = c.Time
		case c.Method == "POST" && c.Body["name"] == "npu serve smoke":
			merged = c.Time
		}
	}
	t.Logf("last job's check run completed → merged check run: %v (under act, go run included)", merged.Sub(lastJob).Round(time.Millisecond))
}

// actPath is nektos/act, or the test is skipped: unless NPU_SERVE_SMOKE_ACT
// is set, and without act (failed when NPU_SERVE_SMOKE_ACT=required, as
// .ci/run sets).
func actPath(t *testing.T) string {
	if os.Getenv("NPU_SERVE_SMOKE_ACT") == "" {
		t.Skip("the action under act takes minutes: set NPU_SERVE_SMOKE_ACT=1 to run it (.ci/run runs it in a phase of its own, with NPU_SERVE_SMOKE_ACT=required)")
	}
	act, err := exec.LookPath("act")
	if err != nil {
		if gopath, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
			act, err = exec.LookPath(filepath.Join(strings.TrimSpace(string(gopath)), "bin", "act"))
		}
	}
	if err != nil {
		if os.Getenv("NPU_SERVE_SMOKE_ACT") == "required" {
			t.Fatalf("act is required and not installed: %v; run .ci/tools --ci", err)
		}
		t.Skip("act is not installed; .ci/tools --ci installs it")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	return act
}
