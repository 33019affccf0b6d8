package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
)

// TestRunInActions runs the whole command in this process, as a runner
// runs the action on a pull request: the inputs from INPUT_*, the device
// held, the check run and the sticky comment posted while the serve is
// measured, the step's outputs and summary written. The scripts run the
// released gate, built without the race detector (scripttest.Programs);
// here the detector watches the command end to end: the publisher beside
// the run, the supervisor's events, the serve's log capture, the console.
func TestRunInActions(t *testing.T) {
	needPrograms(t)
	// The supervisor is this -race binary: no second's sleep at its exit.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	// The gate hides this process from the serve (PR_SET_DUMPABLE 0: its
	// /proc files become root's); the scripts' listen and stranger are this
	// process too, and the gates they run must see it again.
	t.Cleanup(makeDumpable)
	dir := t.TempDir()
	const head = "1111111111111111111111111111111111111111"
	gh := fakegithub.New("ghs_fake")
	gh.SetPull(7, head)
	srv := httptest.NewServer(gh)
	defer srv.Close()
	event := filepath.Join(dir, "event.json")
	write(t, event, `{"number": 7, "pull_request": {"number": 7, "head": {"sha": "`+head+`", "repo": {"full_name": "acme/serve"}}, "base": {"repo": {"full_name": "acme/serve"}}}}`)
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": dir, "NPU_HOLD_DIR": filepath.Join(dir, "locks"),
		"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/serve", "GITHUB_SHA": strings.Repeat("2", 40),
		"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": event, "GITHUB_RUN_ID": "77",
		"GITHUB_SERVER_URL": "https://github.com", "GITHUB_API_URL": srv.URL,
		"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary.md"), "GITHUB_OUTPUT": filepath.Join(dir, "output.txt"),
		"INPUT_SERVE":        "fakellm --port {port} --instant --rate 400 --first-token-ms 0",
		"INPUT_RATE-SOURCE":  "server",
		"INPUT_REPLIES":      "2",
		"INPUT_MAX-TOKENS":   "8",
		"INPUT_GITHUB-TOKEN": "ghs_fake",
		"INPUT_OUT":          filepath.Join(dir, "out"),
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run"}, func(k string) string { return env[k] }, &stdout, &stderr)
	if code != exitPass {
		t.Fatalf("run = %d, want %d (PASS)\nstdout:\n%s\nstderr:\n%s", code, exitPass, stdout.String(), stderr.String())
	}
	for _, want := range []string{"::add-mask::ghs_fake\n", "RESULT: PASS\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stderr.String(), "ghs_fake") {
		t.Errorf("the token reached stderr:\n%s", stderr.String())
	}
	wantLog := "POST /repos/acme/serve/check-runs 201 name=npu serve smoke head_sha=" + head + " status=in_progress\n" +
		"PATCH /repos/acme/serve/check-runs/1 200 name=npu serve smoke status=completed conclusion=success\n"
	if got := gh.Log(); !strings.HasPrefix(got, wantLog) || !strings.Contains(got, "POST /repos/acme/serve/issues/7/comments 201") {
		t.Errorf("GitHub calls:\n%s\nwant the check run created on the PR head and completed, then the comment:\n%s", got, wantLog)
	}
	if cs := gh.Comments(7); len(cs) != 1 || !strings.Contains(cs[0].Body, "<!-- npu-serve-smoke: npu serve smoke -->") || !strings.Contains(cs[0].Body, "PASS") {
		t.Errorf("PR 7's comments = %+v, want the one sticky comment of a PASS", cs)
	}
	for file, want := range map[string]string{"output.txt": "check-run-id<<", "summary.md": "### ✅ npu serve smoke: PASS"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v; want it to hold %q:\n%s", file, err, want, b)
		}
	}
}
