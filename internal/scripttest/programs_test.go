package scripttest

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

// TestToolsWarmsTheProgramsBuild: the README's set-up (.ci/tools) compiles
// the programs the scripts run as Programs builds them, with every setting
// of release.BuildEnv and the flags of release.BuildFlags that reach the
// compiler, so that the tests' first build of them finds Go's cache warm. A
// setting that differs compiles the whole module and its dependencies
// again, half a minute on a 2-core machine, inside cmd/action's tests.
func TestToolsWarmsTheProgramsBuild(t *testing.T) {
	b, err := os.ReadFile("../../.ci/tools")
	if err != nil {
		t.Fatal(err)
	}
	// warm runs in the set-up of every user, before --ci's part (unless
	// --no-warm, .ci/run's as root), from the module's root (the script is
	// .ci/tools).
	script := string(b)
	call, ci := strings.Index(script, "\nif $warm; then\n\twarmed\nfi\n"), strings.Index(script, "\nif ! $ci; then\n")
	if call < 0 || ci < 0 || call > ci || !strings.Contains(script, "\nwarmed() {\n\tif ! warm; then\n") || !strings.Contains(script, "\nwarm=true\n") {
		t.Errorf(".ci/tools does not call warm (`warmed`, `if ! warm; then`) before its --ci part (`if ! $ci; then`), unless --no-warm (warm=true by default)")
	}
	if !strings.Contains(script, "\t(cd \"$(dirname \"$0\")/..\" &&\n\t\tenv ") {
		t.Errorf(".ci/tools' go build line does not run from the module's root (cd \"$(dirname \"$0\")/..\" on the line before)")
	}
	var line string
	for l := range strings.Lines(script) {
		if strings.HasPrefix(strings.TrimSpace(l), "env ") && strings.Contains(l, " go build ") {
			if line != "" {
				t.Fatalf(".ci/tools has two go build lines:\n%s%s", line, l)
			}
			line = l
		}
	}
	if line == "" {
		t.Fatal(".ci/tools has no go build line: the set-up no longer compiles the scripts' programs")
	}
	env, args, ok := strings.Cut(strings.TrimSuffix(strings.TrimSpace(line), ")"), " go build ")
	if !ok || !strings.HasPrefix(env, "env ") {
		t.Fatalf(".ci/tools' go build line is not `env K=V ... go build ...`: %q", line)
	}
	// GOARCH is the machine's: go env says which.
	env = strings.ReplaceAll(env, `"$(go env GOARCH)"`, runtime.GOARCH)
	gotEnv := strings.Fields(strings.TrimPrefix(env, "env "))
	slices.Sort(gotEnv)
	if diff := cmp.Diff(release.BuildEnv(nil, runtime.GOARCH), gotEnv); diff != "" {
		t.Errorf(".ci/tools builds with another environment than release.BuildEnv (-want +got):\n%s", diff)
	}
	var wantArgs []string
	for _, f := range release.BuildFlags("test") {
		// The linker's flags change the binary, not what is compiled.
		if !strings.HasPrefix(f, "-ldflags=") {
			wantArgs = append(wantArgs, f)
		}
	}
	for _, c := range programs {
		wantArgs = append(wantArgs, c.Pkg)
	}
	if diff := cmp.Diff(wantArgs, strings.Fields(args)); diff != "" {
		t.Errorf(".ci/tools' go build flags and packages are not Programs' (-want +got):\n%s", diff)
	}
}
