// Package scripttest holds the custom commands the end-to-end scripts
// (testscript) of the commands share: exit codes, ports, waiting for a
// background command, and processes that must be gone.
package scripttest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// Setup gives each script a device ticket of its own (NPU_HOLD_DIR), a
// home for ~/NPU-TOKEN, and $UNIQUE: a word no other script run on the
// machine shares, for the command lines a script looks for in /proc.
func Setup(env *testscript.Env) error {
	env.Setenv("UNIQUE", fmt.Sprintf("%d-%s", os.Getpid(), filepath.Base(env.WorkDir)))
	env.Setenv("NPU_HOLD_DIR", env.WorkDir+"/locks")
	env.Setenv("HOME", env.WorkDir+"/home")
	// A binary built with -race sleeps a second before it exits, to let
	// other goroutines report races: a command that is the test binary
	// (procs; npu-hold and its supervisor in npu-hold's scripts) would wait
	// a second each time for nothing.
	env.Setenv("GORACE", "atexit_sleep_ms=0")
	return os.MkdirAll(env.WorkDir+"/home", 0o755)
}

// Exits is "exits N CMD ARGS...": it runs CMD and fails unless it exits with status N.
func Exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not a number", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// Listen is "listen VAR": it holds a free loopback port open for the rest of the script and
// puts its number in $VAR.
func Listen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: listen VAR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.Fatalf("listen: %v", err)
	}
	ts.Defer(func() { ln.Close() })
	ts.Setenv(args[0], strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}

// WaitFor is "waitfor FILE REGEXP": it waits (up to a minute) until FILE matches REGEXP: for
// a background command to reach a point.
func WaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfor FILE REGEXP")
	}
	re := regexp.MustCompile(args[1])
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(ts.MkAbs(args[0])); err == nil && re.Match(b) {
			return
		}
	}
	ts.Fatalf("after a minute, %s does not match %s", args[0], args[1])
}

// NoProc is "noproc TEXT": it fails if a process whose command line holds TEXT is alive a
// minute on (a process being killed may take a moment to go).
func NoProc(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: noproc TEXT")
	}
	var alive []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		alive = alive[:0]
		for _, p := range serve.List() {
			if p.State != 'Z' && strings.Contains(p.Command, args[0]) {
				alive = append(alive, p.String())
			}
		}
		if len(alive) == 0 {
			return
		}
	}
	ts.Fatalf("still alive after a minute: %s", strings.Join(alive, "; "))
}

// Procs is the program "procs TEXT": it prints, one a line, each live
// process whose command line holds TEXT, and exits 0. It leaves out itself
// and the processes it runs under (a shell whose command line names TEXT
// too), so a serve can list what of an earlier run is still alive.
func Procs() int {
	if len(os.Args) != 2 {
		os.Stderr.WriteString("usage: procs TEXT\n")
		return 2
	}
	mine := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !mine[pid]; {
		mine[pid] = true
		p, ok := serve.Stat(pid)
		if !ok {
			break
		}
		pid = p.PPID
	}
	for _, p := range serve.List() {
		if p.State != 'Z' && !mine[p.PID] && strings.Contains(p.Command, os.Args[1]) {
			os.Stdout.WriteString(p.String() + "\n")
		}
	}
	return 0
}

// NeedRoot skips a TestRoot test, saying why, where it does not run as
// root. Every test that needs root is named TestRoot, and CI runs them as
// root apart from the rest (go test -run '^TestRoot' ./...).
func NeedRoot(t testing.TB) {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("needs root (other users' files made with chown, cgroups made by root), and uid %d is not; run as root: go test -run '^TestRoot' ./...", uid)
	}
}

// Condition is the scripts' own conditions: [root] is true when the
// script runs as root; [contain:M] when the supervisor can hold a serve
// with mechanism M (cgroup2, freezer, descendants) on this machine.
func Condition(cond string) (bool, error) {
	if cond == "root" {
		return os.Geteuid() == 0, nil
	}
	if m, ok := strings.CutPrefix(cond, "contain:"); ok {
		if err := supervise.CheckContain(m); err != nil || m == "auto" {
			return false, fmt.Errorf("condition %s: not a mechanism: pass one of %s", cond, strings.Join(supervise.Mechanisms, ", "))
		}
		return supervise.Available(m) == nil, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}
