package serve

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/stage1"
)

// rootCgroup2 skips unless this process is root and may hold a serve in a
// cgroup v2, where the supervisor's first stage starts it.
func rootCgroup2(t *testing.T) {
	t.Helper()
	for _, m := range rootMechanisms(t) {
		if m == "cgroup2" {
			return
		}
	}
	t.Skip("root may make no cgroup v2 here")
}

// cgroupParent is the cgroup v2 this process is in, where a supervisor it
// starts makes the serve's; the test skips where the first stage would not
// read it.
func cgroupParent(t *testing.T) string {
	t.Helper()
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	parent, why := stage1.CgroupParent(string(cg), string(mi))
	if why != "" {
		t.Skip(why)
	}
	return parent
}

// env is this process's environment with key set to value ("" unset).
func env(key, value string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	if value != "" {
		out = append(out, key+"="+value)
	}
	return out
}

// TestRootFirstStageOrNot: the supervisor's first stage starts the serve
// where it can do all the supervisor would (a cgroup v2 under "auto" or
// "cgroup2", a serve on an absolute PATH), and leaves every other start to
// the supervisor; either way the serve runs in the same container and
// stops the same.
func TestRootFirstStageOrNot(t *testing.T) {
	rootCgroup2(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	bin := filepath.Dir(sleep)
	for _, tc := range []struct {
		name    string
		argv0   string
		env     []string
		contain string
		early   bool
	}{
		{"auto by default", sleep, env(supervise.ContainEnv, ""), "cgroup2", true},
		{"auto", sleep, env(supervise.ContainEnv, "auto"), "cgroup2", true},
		{"cgroup2", sleep, env(supervise.ContainEnv, "cgroup2"), "cgroup2", true},
		{"by name on PATH", "sleep", env("PATH", bin), "cgroup2", true},
		// A relative entry before the serve's: exec.LookPath's rules are
		// the supervisor's to apply.
		{"a relative PATH entry", "sleep", env("PATH", "rel:"+bin), "cgroup2", false},
		{"descendants", sleep, env(supervise.ContainEnv, "descendants"), "descendants", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(Options{Argv: []string{tc.argv0, "600"}, Env: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			m, cgroup, _ := p.Contain()
			if p.Early() != tc.early || m != tc.contain {
				t.Errorf("Early() = %v, Contain() = %s; want %v, %s", p.Early(), m, tc.early, tc.contain)
			}
			if cgroup != "" {
				b, err := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
				if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(p.PID()) {
					t.Errorf("%s/cgroup.procs = %q, %v; want the serve's pid %d alone", cgroup, b, err, p.PID())
				}
			}
			st := p.Stop(10 * time.Second)
			if st.Exit != "stopped by the gate (TERM)" || st.Survivors != 0 || st.Contain != tc.contain {
				t.Errorf("Stop() = %+v, want the serve stopped by TERM, no survivors, by %s", st, tc.contain)
			}
			if _, err := os.Stat(cgroup); cgroup != "" && !os.IsNotExist(err) {
				t.Errorf("the serve's cgroup %s after the stop: %v, want it removed", cgroup, err)
			}
		})
	}
}

// TestRootFirstStageHandsOverTERM: a TERM in the supervisor's first
// milliseconds, after the first stage forked the serve and before the
// supervisor's own code runs, still stops the serve and its tree, and the
// supervisor says so: the first stage caught it and handed it on. (Not
// caught, the supervisor died of it, and the serve's exit went unseen; not
// handed on, the supervisor never stopped.)
func TestRootFirstStageHandsOverTERM(t *testing.T) {
	rootCgroup2(t)
	marker := "handover-marker-" + strconv.Itoa(os.Getpid())
	p, err := Start(Options{Argv: []string{"sh", "-c", "sleep 600 & exec sleep 600", marker}, Env: env(supervise.ContainEnv, "")})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Early() {
		t.Fatal("the first stage did not start the serve")
	}
	syscall.Kill(p.SupervisorPID(), syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatal("the serve still ran a minute after its supervisor's TERM")
	}
	if got := p.Exit(); got != "stopped by the gate (TERM)" {
		t.Errorf("Exit() = %q, want the serve stopped by its supervisor's TERM", got)
	}
	st := p.Stop(10 * time.Second)
	if st.Survivors != 0 {
		t.Errorf("Stop() = %+v, want no survivors", st)
	}
}

// TestRootStaleCgroupsRemoved: a supervisor killed before it could remove
// its cgroup leaves it empty; the next supervisor below the same parent
// removes it, whether its first stage started the serve or it did.
func TestRootStaleCgroupsRemoved(t *testing.T) {
	rootCgroup2(t)
	parent := cgroupParent(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	for _, tc := range []struct {
		name  string
		argv0 string
		env   []string
		early bool
	}{
		{"first stage", sleep, env(supervise.ContainEnv, ""), true},
		{"supervisor", "sleep", env("PATH", "rel:"+filepath.Dir(sleep)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No process has a pid above the kernel's largest.
			stale := filepath.Join(parent, "npu-serve-smoke-4194305")
			if err := os.MkdirAll(filepath.Join(stale, "made-by-its-serve"), 0o755); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(filepath.Join(stale, "made-by-its-serve"))
			defer os.Remove(stale)
			p, err := Start(Options{Argv: []string{tc.argv0, "600"}, Env: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			if p.Early() != tc.early {
				t.Errorf("Early() = %v, want %v", p.Early(), tc.early)
			}
			p.Stop(10 * time.Second)
			if _, err := os.Stat(stale); !os.IsNotExist(err) {
				t.Errorf("the stale cgroup %s after a supervisor's run: %v, want it removed", stale, err)
			}
		})
	}
}

// TestRootFirstStageFailedExec: a serve that is executable by its mode but
// cannot be run (no #! line, not ELF) fails in the first stage's fork; it
// removes the cgroup it made and leaves the start to the supervisor, which
// fails it as it always has, and leaves no cgroup behind either.
func TestRootFirstStageFailedExec(t *testing.T) {
	rootCgroup2(t)
	parent := cgroupParent(t)
	bad := filepath.Join(t.TempDir(), "not-a-program")
	if err := os.WriteFile(bad, []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(parent, "npu-serve-smoke-*"))
	_, err := Start(Options{Argv: []string{bad}, Env: env(supervise.ContainEnv, "")})
	if err == nil || !strings.Contains(err.Error(), "exec format error") || !strings.Contains(err.Error(), bad) {
		t.Errorf("Start(%s) = %v, want the exec's error, naming it", bad, err)
	}
	after, _ := filepath.Glob(filepath.Join(parent, "npu-serve-smoke-*"))
	for _, d := range after {
		if !slices.Contains(before, d) {
			t.Errorf("%s is left after a start that failed", d)
		}
	}
}
