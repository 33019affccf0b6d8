package serveenv

import (
	"slices"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/runner", "LC_ALL=C", "CUDA_VISIBLE_DEVICES=1", "ASCEND_RT_VISIBLE_DEVICES=2",
		"OLLAMA_MODELS=/m", "HF_HOME=/hf", "VLLM_USE_V1=1", "LD_LIBRARY_PATH=/opt/lib",
		"INPUT_GITHUB-TOKEN=ghs_x", "INPUT_SERVE=x", "GITHUB_TOKEN=ghs_y", "ACTIONS_RUNTIME_TOKEN=r",
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN=o", "ACTIONS_ID_TOKEN_REQUEST_URL=u", "ACTIONS_CACHE_URL=c",
		"GITHUB_OUTPUT=/o", "GITHUB_ENV=/e", "GITHUB_PATH=/p", "GITHUB_STATE=/s", "GITHUB_STEP_SUMMARY=/m",
		"GITHUB_REPOSITORY=acme/serve", "RUNNER_TEMP=/t", "MINE=1", "NOT_MINE=2",
	}
	got := Build(environ, []string{"GIVEN=a=b", "PATH=/opt/bin"}, []string{"MINE", "UNSET"}, []string{"NPU_HOLD_DEVICES=0,1", "ASCEND_RT_VISIBLE_DEVICES=0,1"})
	want := []string{"HOME=/home/runner", "LC_ALL=C", "CUDA_VISIBLE_DEVICES=1", "OLLAMA_MODELS=/m", "HF_HOME=/hf", "VLLM_USE_V1=1",
		"LD_LIBRARY_PATH=/opt/lib", "MINE=1", "GIVEN=a=b", "PATH=/opt/bin", "NPU_HOLD_DEVICES=0,1", "ASCEND_RT_VISIBLE_DEVICES=0,1"}
	if !slices.Equal(got, want) {
		t.Errorf("Build:\n got %q\nwant %q", got, want)
	}
	// A refused name is left out wherever it comes from.
	got = Build([]string{"GITHUB_TOKEN=x"}, []string{"GITHUB_OUTPUT=/o", "INPUT_X=1"}, []string{"GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN"}, nil)
	if len(got) != 0 || got == nil {
		t.Errorf("Build of refused names: %q, want an empty, non-nil environment (nil is the gate's own)", got)
	}
}

func TestCheck(t *testing.T) {
	if err := Check([]string{"A=1", "B_C-D=", "CUDA_VISIBLE_DEVICES=0"}, []string{"HF_TOKEN", "MY_VAR"}, "--serve-env", "--serve-env-pass"); err != nil {
		t.Errorf("Check of good input: %v", err)
	}
	err := Check(
		[]string{"NOVALUE", "ghs_secret.x", "1X=2", "GITHUB_TOKEN=ghs_secret", "GITHUB_ENV=/x", "A B=1"},
		[]string{"INPUT_GITHUB-TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "A=B", ""}, "--serve-env", "--serve-env-pass")
	if err == nil {
		t.Fatal("Check of bad input: nil")
	}
	msg := err.Error()
	for _, want := range []string{
		`--serve-env "NOVALUE": not NAME=VALUE`,
		`--serve-env a value: not NAME=VALUE`,
		`--serve-env "1X"=...: not a variable's name`,
		`--serve-env GITHUB_TOKEN=...: a secret`,
		`--serve-env GITHUB_ENV=...: a file command`,
		`--serve-env "A B"=...: not a variable's name`,
		`--serve-env-pass INPUT_GITHUB-TOKEN: a secret`,
		`--serve-env-pass ACTIONS_ID_TOKEN_REQUEST_URL: a secret`,
		`--serve-env-pass GITHUB_PATH: a file command`,
		`--serve-env-pass GITHUB_STATE: a file command`,
		`--serve-env-pass GITHUB_OUTPUT: a file command`,
		`--serve-env-pass GITHUB_STEP_SUMMARY: a file command`,
		`--serve-env-pass "A=B": not a variable's name`,
		`--serve-env-pass "": not a variable's name`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Check's error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "ghs_secret") {
		t.Errorf("Check's error shows a value:\n%s", msg)
	}
	if n := strings.Count(msg, "\n") + 1; n != 14 {
		t.Errorf("Check gave %d problems, want 14:\n%s", n, msg)
	}
}

func TestAllowed(t *testing.T) {
	for _, name := range []string{"PATH", "HOME", "USER", "LANG", "LC_CTYPE", "TMPDIR", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR", "HIP_VISIBLE_DEVICES", "OLLAMA_HOST", "HF_HOME"} {
		if !Allowed(name) {
			t.Errorf("Allowed(%q) = false", name)
		}
	}
	for _, name := range []string{"GITHUB_TOKEN", "INPUT_GITHUB-TOKEN", "ACTIONS_RUNTIME_TOKEN", "GITHUB_OUTPUT", "GITHUB_API_URL", "RUNNER_TEMP", "NODE_OPTIONS", "LD_PRELOAD", "PYTHONPATH", "NPU_HOLD_DIR", "AWS_SECRET_ACCESS_KEY"} {
		if Allowed(name) {
			t.Errorf("Allowed(%q) = true", name)
		}
	}
}

// Lookup is the last value given a name, as the process would read it.
func TestLookup(t *testing.T) {
	environ := []string{"PATH=/a", "HOME=/h", "PATH=/b", "PATHX=/c", "=C:=x", "NOVALUE"}
	for name, want := range map[string]string{"PATH": "/b", "HOME": "/h", "PATHX": "/c"} {
		if got, ok := Lookup(environ, name); !ok || got != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"PAT", "NOVALUE", "", "USER"} {
		if got, ok := Lookup(environ, name); ok {
			t.Errorf("Lookup(%q) = %q, true; want not found", name, got)
		}
	}
}
