package supervise

import (
	"strings"
	"testing"
)

// TestWindowsHasTheJobAlone: on Windows the one mechanism is the job, the
// Linux ones are refused before anything starts, and the supervise
// command says there is none.
func TestWindowsHasTheJobAlone(t *testing.T) {
	for _, m := range []string{"", "auto", "job"} {
		if err := CheckContain(m); err != nil {
			t.Errorf("CheckContain(%q) = %v", m, err)
		}
		if err := Available(m); err != nil {
			t.Errorf("Available(%q) = %v", m, err)
		}
	}
	for _, m := range []string{"cgroup2", "freezer", "descendants"} {
		if err := CheckContain(m); err == nil || !strings.Contains(err.Error(), "pass auto or one of job") {
			t.Errorf("CheckContain(%q) = %v, want it refused", m, err)
		}
	}
	var out strings.Builder
	if code := Main([]string{"--", "serve"}, func(string) string { return "" }, &out); code != 2 || !strings.Contains(out.String(), "no supervisor on Windows") {
		t.Errorf("Main = %d, %q", code, out.String())
	}
}
