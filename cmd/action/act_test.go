package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
)

// The composite action as a runner runs it: nektos/act in host mode (no
// Docker) runs the project's own CI workflow, whose `action` job uses `./`
// against the simulated serve, with GITHUB_API_URL on a fake GitHub. act
// cannot fetch actions from GitHub here, so actions/checkout and
// actions/setup-go stand replaced by a no-op (the workspace is the work
// tree, and Go is the machine's).
//
// It needs act on PATH (.ci/tools --ci installs it). Without it the test skips,
// unless NPU_SERVE_SMOKE_ACT=required, as .ci/run sets.
func TestActionUnderAct(t *testing.T) {
	act := findAct(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	noop := filepath.Join(dir, "noop")
	write(t, filepath.Join(noop, "action.yml"), `name: noop
description: stands in for a remote action act cannot fetch offline
inputs:
  go-version:
    description: ignored
runs:
  using: composite
  steps:
    - run: "true"
      shell: bash
`)
	const head = "1111111111111111111111111111111111111111"
	event := filepath.Join(dir, "event.json")
	write(t, event, `{"number": 7, "pull_request": {"number": 7,
  "head": {"sha": "`+head+`", "repo": {"full_name": "acme/serve"}},
  "base": {"repo": {"full_name": "acme/serve"}}}}`)

	gh := fakegithub.New("ghs_fake")
	srv := httptest.NewServer(gh)
	defer srv.Close()

	runAct := func(root, workflow, job string) (string, error) {
		return runActIn(act, root, os.Environ(), "pull_request",
			"-W", workflow, "-j", job,
			"-P", "ubuntu-latest=-self-hosted",
			"-e", event,
			"-s", "GITHUB_TOKEN=ghs_fake",
			"--env", "GITHUB_API_URL="+srv.URL,
			// act takes the repository from the git remote, which a clone
			// on a CI machine names by its path: say it.
			"--env", "GITHUB_REPOSITORY=acme/serve",
			// A lock directory of the test's own, not the machine's
			// /run/lock/npu-hold, whose owner the test does not choose.
			"--env", "NPU_HOLD_DIR="+filepath.Join(dir, "locks"),
			"--local-repository", "actions/checkout@v4="+noop,
			"--local-repository", "actions/setup-go@v5="+noop,
		)
	}

	out, err := runAct(root, filepath.Join(root, ".github/workflows/ci.yml"), "action")
	if err != nil {
		t.Fatalf("act on the CI workflow's action job: %v\n%s", err, tail(out, 80))
	}
	checks := gh.CheckRuns()
	if len(checks) != 2 {
		t.Fatalf("%d check runs posted, want 2 (fast, slow):\n%s\nact said:\n%s", len(checks), gh.Log(), tail(out, 60))
	}
	for i, want := range []struct{ name, conclusion string }{
		{"npu serve smoke (simulated)", "success"},
		{"npu serve smoke (simulated slow route)", "failure"},
	} {
		if checks[i]["name"] != want.name || checks[i]["conclusion"] != want.conclusion || checks[i]["head_sha"] != head {
			t.Errorf("check run %d = %v %v on %v, want %q %s on the PR head", i, checks[i]["name"], checks[i]["conclusion"], checks[i]["head_sha"], want.name, want.conclusion)
		}
	}
	cs := gh.Comments(7)
	if len(cs) != 1 || !strings.HasPrefix(cs[0].Body, "<!-- npu-serve-smoke: npu serve smoke (simulated) -->") {
		t.Errorf("PR comments = %d, want one sticky comment of the fast run (the slow run has comment: never):\n%s", len(cs), gh.Log())
	}
	// `uses: ./` has no release: the gate is built from the work tree.
	for _, want := range []string{"result=pass", "route=fast", "no release binary (", "building from the action's source", "Success - Main It failed on the route", "Summary - ### ✅ npu serve smoke: PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("act's output lacks %q", want)
		}
	}
	if strings.Contains(out, "ghs_fake") {
		t.Errorf("the token was printed")
	}

	// A slow-route run without continue-on-error fails its job: a workflow
	// of its own, in a copy of the work tree.
	tree := filepath.Join(dir, "tree")
	copyTree(t, root, tree)
	wf := filepath.Join(tree, ".github/workflows/slow.yml")
	write(t, wf, `name: slow
on: pull_request
jobs:
  gate:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: go build -o "$RUNNER_TEMP/sim" ./cmd/action
      - uses: ./
        with:
          serve: ${{ runner.temp }}/sim fakellm --port {port} --route slow --rate 20 --first-token-ms 700
          replies: 1
          max-tokens: 4
          comment: never
      - run: echo "not reached"
`)
	out, err = runAct(tree, wf, "gate")
	if err == nil {
		t.Errorf("act on a slow-route gate succeeded; want the job failed:\n%s", tail(out, 40))
	}
	// act (host mode) returns from a failed step without draining its
	// terminal, so the gate's last console lines may be missing from act's
	// output on a loaded machine; the summary and the step outputs are files
	// act reads after the step, so they are always there.
	for _, want := range []string{"Summary - ### ❌ npu serve smoke: FAIL", "::set-output:: result=fail", "::set-output:: route=slow"} {
		if !strings.Contains(out, want) {
			t.Errorf("act's output of the slow-route job lacks %q:\n%s", want, tail(out, 40))
		}
	}
	if strings.Contains(out, "Success - Main echo") {
		t.Errorf("the slow-route job did not stop at the gate:\n%s", tail(out, 40))
	}
	if checks := gh.CheckRuns(); len(checks) != 3 || checks[2]["conclusion"] != "failure" {
		t.Errorf("the slow-route job's check run: %d check runs, want a third with conclusion failure:\n%s", len(checks), gh.Log())
	}
}

// findAct is act's path. The test skips unless NPU_SERVE_SMOKE_ACT is set
// (the action under act takes minutes), and without act it skips too,
// unless NPU_SERVE_SMOKE_ACT=required, as .ci/run sets.
func findAct(t *testing.T) string {
	t.Helper()
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

// runActIn runs act in host mode (no Docker) in dir with env.
func runActIn(act, dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command(act, args...)
	cmd.Dir = dir
	cmd.Env = append(env, "DOCKER_HOST=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// copyTree copies the files git knows of (tracked, or untracked and not
// ignored) from root to dst.
func copyTree(t testing.TB, root, dst string) {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-co", "--exclude-standard", "-z")
	ls.Dir = root
	var stderr strings.Builder
	ls.Stderr = &stderr
	names, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v: %s\nthis test copies the files git knows of: run it in a clone of the repository (a source archive has no .git)", root, err, strings.TrimSpace(stderr.String()))
	}
	for _, name := range strings.Split(strings.TrimRight(string(names), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree
		}
		write(t, filepath.Join(dst, name), string(b))
	}
	// act reads the commit from git.
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-qm", "tree"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dst
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
