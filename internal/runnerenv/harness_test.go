//go:build linux

package runnerenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// The runner's user: nobody, in no group but its own.
const (
	runnerUID = 65534
	runnerGID = 65534
)

const needsRoot = "needs root to build the environment; .ci/run runs TestRoot tests as root"

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(needsRoot)
	}
	for _, tool := range []string{"unshare", "setpriv", "mount", "umount", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (util-linux): %v", tool, err)
		}
	}
}

// The binaries under test, built once into a directory every user can
// read: the gate (npu-serve-smoke) and npu-hold.
var built struct {
	once      sync.Once
	dir       string
	gate, npu string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func binaries(t testing.TB) (gate, npuHold string) {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "runnerenv-bin-")
		if built.err != nil {
			return
		}
		os.Chmod(built.dir, 0o755)
		cmd := exec.Command("go", "build", "-o", built.dir+"/", "./cmd/action", "./cmd/npu-hold")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.gate = filepath.Join(built.dir, "npu-serve-smoke")
		if err := os.Rename(filepath.Join(built.dir, "action"), built.gate); err != nil {
			built.err = err
		}
		built.npu = filepath.Join(built.dir, "npu-hold")
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.gate, built.npu
}

// dir makes a fresh directory of the given mode, owned by uid, removed at
// the end of the test.
func dir(t testing.TB, uid int, mode os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("", "runnerenv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Chmod(d, 0o700)
		os.RemoveAll(d)
	})
	if err := os.Chown(d, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

// runner is an environment a runner lives in, and how a command is run
// there: root builds it (unshare's namespaces, then setup in a shell), then
// the command runs as the runner's user (or as root) with only the
// environment given.
type runner struct {
	unshare []string // unshare's flags; none: no new namespace
	setup   string   // shell run as root in the namespaces first
	root    bool     // the command runs as root, not as the runner's user
	// pid1 keeps the setup shell as the namespace's first process, the
	// command its child, as in a container (with unshare --pid --fork).
	pid1 bool
	// linger, with pid1, is a file: while it is there, the runner stays
	// after the command ends, as a runner outlives a job's killed step.
	linger string
	env    map[string]string
}

// command is argv run in the environment. Its pid is the command's own
// unless pid1 is set: unshare, sh and setpriv exec each other.
func (r runner) command(argv ...string) *exec.Cmd {
	drop := "exec "
	if !r.root {
		drop += fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups ", runnerUID, runnerGID)
	}
	drop += `env -i "$@"`
	if r.pid1 {
		drop = strings.TrimPrefix(drop, "exec ") + "\ncode=$?"
		if r.linger != "" {
			drop += "\nwhile [ -e " + r.linger + " ]; do sleep 0.05; done"
		}
		drop += "\nexit $code"
	}
	script := "set -e\n" + r.setup + "\nset +e\n" + drop
	var vars []string
	for k, v := range r.env {
		vars = append(vars, k+"="+v)
	}
	args := append([]string{"sh", "-c", script, "sh"}, vars...)
	args = append(args, argv...)
	if len(r.unshare) > 0 {
		args = append(append([]string{"unshare"}, r.unshare...), args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

// build builds the environment once, running nothing in it, and skips the
// test where the kernel refuses it, saying what was refused: a private
// mount namespace, a PID namespace, a mount.
func (r runner) build(t testing.TB) {
	t.Helper()
	if len(r.unshare) == 0 && r.setup == "" {
		return
	}
	probe := r
	probe.root, probe.pid1, probe.linger = true, false, ""
	cmd := probe.command("true")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("the kernel refused the environment: %s: %v: %s", strings.Join(cmd.Args, " "), err, out)
	}
}

// with is r with more of the command's environment.
func (r runner) with(kv ...string) runner {
	env := map[string]string{}
	for k, v := range r.env {
		env[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(env, kv[i])
		} else {
			env[kv[i]] = kv[i+1]
		}
	}
	r.env = env
	return r
}

// site is what one test's runs share: the runner's home, the lock
// directory, the serve's scripts and the mark every process of the run
// carries in its environment.
type site struct {
	home, lock, work, mark string
}

// serveSh is the serve: a detached helper in a session of its own, a
// runaway that forks and calls setsid every 20 ms (so its pid never stays
// the same), a file saying they were started, then the simulated serve.
const serveSh = `# serve.sh PORT GATE DIR FAKELLM-ARGS...
port=$1 gate=$2 dir=$3
shift 3
setsid -f sleep 600
setsid -f sh "$dir/runaway.sh"
: > "$dir/started"
exec "$gate" fakellm --port "$port" "$@"
`

const runawaySh = `sleep 0.02
exec setsid -f sh "$0"
`

func newSite(t testing.TB) site {
	t.Helper()
	s := site{
		home: dir(t, runnerUID, 0o700),
		lock: dir(t, 0, os.ModeSticky|0o777),
		work: dir(t, runnerUID, 0o755),
		mark: fmt.Sprintf("runnerenv-%d-%d", os.Getpid(), time.Now().UnixNano()),
	}
	for name, text := range map[string]string{"serve.sh": serveSh, "runaway.sh": runawaySh} {
		if err := os.WriteFile(filepath.Join(s.work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { killMarked(s.mark) })
	return s
}

// runner is the plain runner of the site: its user, HOME, PATH, the lock
// directory and the mark.
func (s site) runner() runner {
	return runner{env: map[string]string{
		"HOME": s.home, "PATH": "/usr/bin:/bin", "NPU_HOLD_DIR": s.lock, "RUNNERENV_MARK": s.mark,
	}}
}

// gateArgs is a short run of the gate against the serve of serveSh.
func (s site) gateArgs(gate, out string, fakellm ...string) []string {
	serve := fmt.Sprintf("sh %s/serve.sh {port} %s %s --model %s --rate 1000 --first-token-ms 0", s.work, gate, s.work, s.mark)
	if len(fakellm) > 0 {
		serve += " " + strings.Join(fakellm, " ")
	}
	return []string{gate, "run", "--serve", serve, "--replies", "2", "--max-replies", "2", "--max-tokens", "8", "--warmup", "0",
		"--rate-source", "server", "--out", out, "--ready-timeout", "1m",
		// The serve starts with the allow-list: the mark is passed by name,
		// so every process of the serve's tree carries it.
		"--serve-env-pass", "RUNNERENV_MARK"}
}

func (s site) started() bool {
	_, err := os.Stat(filepath.Join(s.work, "started"))
	return err == nil
}

// outcome is what a run of the gate left.
type outcome struct {
	code   int
	stderr string
	res    *report.Result // nil when there is no result.json
}

func run(t testing.TB, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// runGate runs the gate in r with out under the site's work directory.
func (s site) runGate(t testing.TB, r runner, name string, fakellm ...string) outcome {
	t.Helper()
	gate, _ := binaries(t)
	out := filepath.Join(s.work, name)
	if r.root {
		// The gate refuses an out directory under another user's (the
		// runner's user could swap it): root's run writes in root's.
		out = filepath.Join(dir(t, 0, 0o755), name)
	}
	os.Remove(filepath.Join(s.work, "started"))
	code, stdout, stderr := run(t, r.command(s.gateArgs(gate, out, fakellm...)...))
	o := outcome{code: code, stderr: stdout + stderr}
	if b, err := os.ReadFile(filepath.Join(out, report.ResultFile)); err == nil {
		o.res = &report.Result{}
		if err := json.Unmarshal(b, o.res); err != nil {
			t.Fatalf("%s/%s: %v", out, report.ResultFile, err)
		}
	}
	return o
}

// want is what a run that could hold its serve must show.
type want struct {
	contain string   // the mechanism named
	why     []string // in serve.contain_why, each
	cgroup  string   // serve.cgroup's prefix; "" for none
	// stopped: the serve stopped its supervisor, so the run fails on the
	// release assertion alone (and everything else holds as for a pass).
	stopped bool
}

// checkPass checks a run's verdict, mechanism, reasons and survivors, that
// nothing of it is left in /proc, and that the ticket is free.
func (s site) checkPass(t testing.TB, r runner, o outcome, w want) {
	t.Helper()
	code, verdict := 0, report.Pass
	if w.stopped {
		code, verdict = 1, report.Fail
	}
	if o.code != code || o.res == nil || o.res.Verdict != verdict {
		got := "no result.json"
		if o.res != nil {
			got = o.res.Verdict + " " + o.res.NoReplies
		}
		t.Fatalf("the gate exited %d (%s), want %d and %s; it said:\n%s", o.code, got, code, verdict, o.stderr)
	}
	if w.stopped != (o.res.Serve.SupervisorStopped > 0) || w.stopped && !strings.Contains(o.stderr, "release      FAIL  the serve's supervisor was found stopped") {
		t.Errorf("serve.supervisor_stopped = %d, want it counted (and the release assertion failed) only when the serve stopped its supervisor (%v); it said:\n%s", o.res.Serve.SupervisorStopped, w.stopped, o.stderr)
	}
	sf := o.res.Serve
	t.Logf("held by %s %s; not used: %s; stop %.0f ms, %d swept, %d survivors", sf.Contain, sf.Cgroup, sf.ContainWhy, sf.StopMS, sf.Swept, sf.Survivors)
	if sf.Contain != w.contain {
		t.Errorf("serve.contain = %q, want %q; the gate said:\n%s", sf.Contain, w.contain, o.stderr)
	}
	for _, why := range w.why {
		if !strings.Contains(sf.ContainWhy, why) {
			t.Errorf("serve.contain_why = %q, want it to say %q", sf.ContainWhy, why)
		}
	}
	if len(w.why) == 0 && sf.ContainWhy != "" {
		t.Errorf("serve.contain_why = %q, want none", sf.ContainWhy)
	}
	if w.cgroup != "" && !strings.HasPrefix(sf.Cgroup, w.cgroup) || w.cgroup == "" && sf.Cgroup != "" {
		t.Errorf("serve.cgroup = %q, want it under %q", sf.Cgroup, w.cgroup)
	}
	if !strings.Contains(o.stderr, "with "+w.contain) {
		t.Errorf("the console does not name %s:\n%s", w.contain, o.stderr)
	}
	if sf.Survivors != 0 {
		t.Errorf("serve.survivors = %d, want 0", sf.Survivors)
	}
	if sf.Swept < 1 {
		t.Errorf("serve.swept = %d, want the detached helper and the runaway swept", sf.Swept)
	}
	if left := marked(s.mark); len(left) > 0 {
		t.Errorf("alive after the gate returned: %s", strings.Join(left, "; "))
	}
	s.checkFree(t, r)
}

// checkFree checks that the device's ticket is free, as npu-hold in r sees
// it: status says so, and a run under the ticket does not wait.
func (s site) checkFree(t testing.TB, r runner) {
	t.Helper()
	_, npuHold := binaries(t)
	code, stdout, stderr := run(t, r.command(npuHold, "status", "--json"))
	var st hold.Status
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.Held {
		t.Errorf("npu-hold status --json = %d, %s%s (%v), want the device free", code, stdout, stderr, err)
	}
	if code, _, stderr := run(t, r.command(npuHold, "--wait", "5s", "--", "true")); code != 0 {
		t.Errorf("npu-hold --wait 5s -- true = %d, want 0: %s", code, stderr)
	}
}

// marked lists every live process whose environment carries mark, as
// "pid N (command line)".
func marked(mark string) []string {
	var out []string
	for _, p := range markedProcs(mark) {
		out = append(out, fmt.Sprintf("pid %d (%s)", p.pid, p.cmd))
	}
	return out
}

type proc struct {
	pid int
	cmd string
}

func markedProcs(mark string) []proc {
	var out []proc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, []byte("RUNNERENV_MARK="+mark+"\x00")) {
			continue
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, proc{pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))})
	}
	return out
}

// killMarked kills what a failed test left behind.
func killMarked(mark string) {
	for range 50 {
		left := markedProcs(mark)
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor waits up to a minute for cond; false when it never held.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// lines copies r's lines into a buffer and a channel.
func lines(r *bufio.Reader, buf *syncBuffer) {
	for {
		l, err := r.ReadString('\n')
		buf.add(l)
		if err != nil {
			return
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) add(s string) {
	b.mu.Lock()
	b.b.WriteString(s)
	b.mu.Unlock()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
