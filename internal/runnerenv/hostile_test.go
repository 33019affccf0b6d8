//go:build linux

package runnerenv

import (
	"os"
	"path/filepath"
	"testing"
)

// hostileServes are serves that turn the delegated cgroup against the
// gate: the runner's user owns the delegated cgroup and the serve's, so the
// serve may write to both. Each script is serve.sh's shape (PORT GATE DIR
// FAKELLM-ARGS...) with $cg the serve's own cgroup directory, and leaves
// "$dir/did" once its trick worked, so a run where the kernel refused it
// cannot pass for one that contained it.
var hostileServes = []struct{ name, script string }{
	{"escapes to the delegated parent", `setsid -f sh -c 'echo $$ > "$0/../cgroup.procs" && : > "$1/did"; exec sleep 600' "$cg" "$dir"`},
	{"a frozen sub-cgroup of its own", `mkdir "$cg/hide" && setsid -f sh -c 'echo $$ > "$0/hide/cgroup.procs"; exec sleep 600' "$cg" && sleep 0.1 && echo 1 > "$cg/hide/cgroup.freeze" && : > "$dir/did"`},
	{"moves its supervisor into its cgroup", `echo $PPID > "$cg/cgroup.procs" && : > "$dir/did"`},
	{"stops its supervisor", `kill -STOP $PPID && : > "$dir/did"`},
	// SIGCONT does not undo a freeze: the stop thaws it.
	{"freezes its supervisor in a cgroup of its own", `mkdir "$cg/../ice" && echo $PPID > "$cg/../ice/cgroup.procs" && echo 1 > "$cg/../ice/cgroup.freeze" && : > "$dir/did"`},
}

// anyServes are hostile with or without a cgroup.
var anyServes = []struct{ name, script string }{
	{"kills its supervisor", `setsid -f sh -c 'while [ ! -e "$1/out/reply_2.json" ]; do sleep 0.01; done; kill -KILL $0' $PPID "$dir" && : > "$dir/did"`},
	{"forks faster than the sweep", `setsid -f sh -c 'while :; do sleep 600 & done' && : > "$dir/did"`},
	{"ignores TERM, a child with no descriptors", `trap '' TERM; setsid -f sh -c 'exec sleep 600 0<&- 1>&- 2>&-' && : > "$dir/did"`},
}

const hostilePrefix = `# PORT GATE DIR FAKELLM-ARGS...
port=$1 gate=$2 dir=$3
shift 3
cg=` + unified + `$(sed -n 's/^0:://p' /proc/self/cgroup)
setsid -f sleep 600
`

const hostileSuffix = `
: > "$dir/started"
exec "$gate" fakellm --port "$port" "$@"
`

// TestRootHostileDelegated: a runner with a delegated cgroup v2 whose serve
// uses the delegation against the gate; each run still passes with
// nothing left (one that stopped its supervisor fails on the release
// assertion alone), and the delegated cgroup is left as it was.
func TestRootHostileDelegated(t *testing.T) {
	needRoot(t)
	needUnified(t)
	for _, h := range append(hostileServes, anyServes...) {
		t.Run(h.name, func(t *testing.T) {
			s := newSite(t)
			cg := delegate(t)
			r := s.runner()
			r.setup = enter(filepath.Join(unified, cg))
			r.build(t)
			if err := os.WriteFile(filepath.Join(s.work, "serve.sh"), []byte(hostilePrefix+h.script+hostileSuffix), 0o644); err != nil {
				t.Fatal(err)
			}
			o := s.runGate(t, r, "out")
			if _, err := os.Stat(filepath.Join(s.work, "did")); err != nil {
				t.Fatalf("the serve's trick did not work (%v); the gate said:\n%s", err, o.stderr)
			}
			stopped := h.name == "stops its supervisor" || h.name == "freezes its supervisor in a cgroup of its own"
			w := want{contain: "cgroup2", cgroup: filepath.Join(unified, cg, "npu-serve-smoke-"), stopped: stopped}
			s.checkPass(t, r, o, w)
		})
	}
}

// TestRootHostileNoCgroup: the ordinary runner, no cgroup of its own, and a
// serve that turns on its supervisor or outpaces the sweep.
func TestRootHostileNoCgroup(t *testing.T) {
	needRoot(t)
	for _, h := range anyServes {
		t.Run(h.name, func(t *testing.T) {
			s := newSite(t)
			r := s.runner()
			if err := os.WriteFile(filepath.Join(s.work, "serve.sh"), []byte(hostilePrefix+h.script+hostileSuffix), 0o644); err != nil {
				t.Fatal(err)
			}
			o := s.runGate(t, r, "out")
			if _, err := os.Stat(filepath.Join(s.work, "did")); err != nil {
				t.Fatalf("the serve's trick did not work (%v); the gate said:\n%s", err, o.stderr)
			}
			s.checkPass(t, r, o, want{contain: "descendants", why: []string{"cgroup2: ", "freezer: "}})
		})
	}
}
