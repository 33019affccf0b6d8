package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// judging are the gate's inputs that decide a verdict, which publish takes
// as flags of the same names: the publish workflow judges a fork's artifact
// with its own, and a setting the gate has and it lacks (or one it has and
// the gate lacks) judges the artifact as the gate did not.
var judging = []string{"check-name", "preset", "floor", "first-token-ms", "fast-route", "slow-route",
	"rate-source", "max-regression", "load", "load-expect", "load-efficiency", "load-first-token-ms",
	"witness", "witness-device", "witness-library", "max-joules-per-token"}

// The publish workflow posts a fork's run with the gate workflow's judging
// settings, each the same: a --fast-route of its own in place of the
// preset's patterns passed on the log's count alone a run the gate's
// preset failed for its weights in host buffers.
func TestPublishWorkflowJudgesAsTheGate(t *testing.T) {
	gate := gateInputs(t, filepath.Join(root, ".github/workflows/release-gate.yml"))
	pub := publishFlags(t, filepath.Join(root, ".github/workflows/release-gate-publish.yml"))
	if gate["preset"] == "" || pub["check-name"] == "" {
		t.Fatalf("the workflows no longer read as this test expects: gate %v, publish %v", gate, pub)
	}
	for _, k := range judging {
		if gate[k] != pub[k] {
			t.Errorf("%s: release-gate.yml gives %q, release-gate-publish.yml's publish --%s %q; keep them the same", k, gate[k], k, pub[k])
		}
	}
}

// gateInputs is the with: of the step that uses ./ in the workflow at path.
func gateInputs(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]string{}
	lines := strings.Split(string(b), "\n")
	input := regexp.MustCompile(`^(\s+)([a-z-]+): *(.*)$`)
	for i, l := range lines {
		if strings.TrimSpace(l) != "uses: ./" {
			continue
		}
		indent := -1
		for _, l := range lines[i+1:] {
			s := strings.TrimSpace(l)
			if s == "" || strings.HasPrefix(s, "#") || s == "with:" {
				continue
			}
			m := input.FindStringSubmatch(l)
			if m == nil || (indent >= 0 && len(m[1]) != indent) {
				break
			}
			indent = len(m[1])
			in[m[2]] = unquote(m[3])
		}
		return in
	}
	t.Fatalf("%s: no step uses ./", path)
	return nil
}

// publishFlags is the flags of the publish command in the workflow at path.
func publishFlags(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "cmd/action publish ")
	if i < 0 {
		t.Fatalf("%s: no publish command", path)
	}
	flags := map[string]string{}
	flag := regexp.MustCompile(`--([a-z-]+) +('[^']*'|"[^"]*"|[^\s']+)`)
	for _, m := range flag.FindAllStringSubmatch(s[i:], -1) {
		flags[m[1]] = unquote(m[2])
	}
	return flags
}

func unquote(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}
