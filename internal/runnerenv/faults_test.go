//go:build linux

package runnerenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// containerLike is a runner in a pod (actions-runner-controller): its own
// PID namespace with the runner's shell as PID 1 and the gate below it, a
// /run of its own (no /run/lock), /sys/fs/cgroup read-only.
func (s site) containerLike() runner {
	r := s.runner()
	r.unshare = []string{"--pid", "--fork", "--mount-proc", "-m", "--propagation", "private"}
	r.pid1 = true
	r.setup = `[ $$ = 1 ]
mount -t tmpfs tmpfs /run
for m in $(awk '$5 ~ "^/sys/fs/cgroup" {print $5}' /proc/self/mountinfo); do mount -o remount,bind,ro "$m"; done`
	return r
}

// TestRootContainer: a container-like runner holds its serve with
// descendants, saying the cgroups are read-only; with no lock directory it
// starts nothing and says how to give it one.
func TestRootContainer(t *testing.T) {
	needRoot(t)
	s := newSite(t)
	r := s.containerLike()
	r.build(t)
	t.Run("run", func(t *testing.T) {
		s.checkPass(t, r, s.runGate(t, r, "out"), want{contain: "descendants", why: []string{
			"cgroup2: /sys/fs/cgroup/unified is mounted read-only", "freezer: /sys/fs/cgroup/freezer is mounted read-only"}})
	})
	t.Run("killed", func(t *testing.T) {
		s.killedGate(t, r)
	})
	t.Run("no lock directory", func(t *testing.T) {
		s.cannotHold(t, r.with("NPU_HOLD_DIR", ""), "the lock directory /run/lock/npu-hold cannot be made (its parent /run/lock does not exist)")
	})
}

// cannotHold checks that where no ticket can be made, the gate and
// npu-hold start nothing and say why and what mends it.
func (s site) cannotHold(t *testing.T, r runner, why string) {
	t.Helper()
	fixes := []string{why, "set NPU_HOLD_DIR to a directory of mode 1777", "hold: none", "(docs/runner.md)"}
	o := s.runGate(t, r, "cannot")
	if o.code != 2 || o.res != nil || !strings.Contains(o.stderr, "the device cannot be held, nothing was started") {
		t.Errorf("the gate = %d (result.json: %v), want 2, no result, nothing started; it said:\n%s", o.code, o.res != nil, o.stderr)
	}
	for _, f := range fixes {
		if !strings.Contains(o.stderr, f) {
			t.Errorf("the gate does not say %q:\n%s", f, o.stderr)
		}
	}
	if s.started() {
		t.Error("the serve was started though no ticket could be had")
	}
	_, npuHold := binaries(t)
	ran := filepath.Join(s.work, "ran")
	os.Remove(ran)
	code, _, stderr := run(t, r.command(npuHold, "--", "touch", ran))
	if _, err := os.Stat(ran); err == nil || code != 1 {
		t.Errorf("npu-hold -- touch = %d, ran: %v, want 1 and not run; it said:\n%s", code, err == nil, stderr)
	}
	for _, f := range fixes {
		if !strings.Contains(stderr, f) {
			t.Errorf("npu-hold does not say %q:\n%s", f, stderr)
		}
	}
}

// TestRootLockDir: a lock directory that is missing, or that the runner's
// user cannot write: nothing starts, and the fix is named.
func TestRootLockDir(t *testing.T) {
	needRoot(t)
	s := newSite(t)
	t.Run("missing", func(t *testing.T) {
		missing := filepath.Join(dir(t, 0, 0o755), "no", "npu-hold")
		s.cannotHold(t, s.runner().with("NPU_HOLD_DIR", missing),
			"the lock directory "+missing+" cannot be made (its parent "+filepath.Dir(missing)+" does not exist)")
	})
	t.Run("default, not there", func(t *testing.T) {
		// /run/lock is there (mode 1777) but not npu-hold: one the user
		// made would be the user's, refused by every other user.
		r := s.runner().with("NPU_HOLD_DIR", "")
		r.unshare, r.setup = privateMounts, "mount -t tmpfs tmpfs /run\nmkdir -m 1777 /run/lock"
		r.build(t)
		s.cannotHold(t, r, fmt.Sprintf("the lock directory /run/lock/npu-hold does not exist, and one made by uid %d would be refused by every other user", runnerUID))
	})
	t.Run("another user's", func(t *testing.T) {
		theirs := dir(t, 1001, os.ModeSticky|0o777)
		r := s.runner().with("NPU_HOLD_DIR", theirs)
		o := s.runGate(t, r, "theirs")
		if o.code != 2 || s.started() || !strings.Contains(o.stderr, "the lock directory "+theirs+" belongs to ") {
			t.Errorf("the gate with another user's lock directory = %d, want 2, nothing started, naming its owner; it said:\n%s", o.code, o.stderr)
		}
		_, npuHold := binaries(t)
		code, stdout, _ := run(t, r.command(npuHold, "doctor"))
		if code != 1 || !strings.Contains(stdout, "FAIL  lock directory "+theirs+" belongs to ") {
			t.Errorf("npu-hold doctor with another user's lock directory = %d, want 1 and a FAIL naming its owner:\n%s", code, stdout)
		}
	})
	t.Run("root's, from a user namespace", func(t *testing.T) {
		// A rootless container or a pod with hostUsers: false: root's
		// directory shows as the overflow uid, as anyone's would.
		_, npuHold := binaries(t)
		r := s.runner()
		if code, _, stderr := run(t, r.command("unshare", "--user", "--map-user=1000", "true")); code != 0 {
			t.Skipf("the kernel refused a user namespace to uid %d: unshare --user --map-user=1000: %s", runnerUID, stderr)
		}
		code, _, stderr := run(t, r.command("unshare", "--user", "--map-user=1000", npuHold, "--wait", "5s", "--", "true"))
		if code != 1 || !strings.Contains(stderr, "is how every user outside it shows (root or anyone)") || !strings.Contains(stderr, "hostUsers") {
			t.Errorf("npu-hold in a user namespace with root's lock directory = %d, want 1 and the namespace named as the cause; it said:\n%s", code, stderr)
		}
		code, stdout, _ := run(t, r.command("unshare", "--user", "--map-user=1000", npuHold, "doctor"))
		if code != 1 || !strings.Contains(stdout, "FAIL  lock directory "+s.lock+" belongs to uid 65534, which in this user namespace is how every user outside it shows") {
			t.Errorf("npu-hold doctor in a user namespace with root's lock directory = %d, want 1 and a FAIL naming the namespace:\n%s", code, stdout)
		}
	})
	t.Run("not writable", func(t *testing.T) {
		ro := dir(t, 0, 0o755)
		s.cannotHold(t, s.runner().with("NPU_HOLD_DIR", ro),
			fmt.Sprintf("the lock directory %s is not writable by uid %d (mode 0755, owner root (uid 0)), so no ticket can be made in it; chmod 1777 %s as root", ro, runnerUID, ro))
	})
}

// TestRootHome: HOME unset or read-only costs the token file only, and
// says so.
func TestRootHome(t *testing.T) {
	needRoot(t)
	s := newSite(t)
	noCgroup := want{contain: "descendants", why: []string{"cgroup2: ", "freezer: "}}
	_, npuHold := binaries(t)
	t.Run("unset", func(t *testing.T) {
		r := s.runner().with("HOME", "")
		o := s.runGate(t, r, "nohome")
		s.checkPass(t, r, o, noCgroup)
		if !strings.Contains(o.stderr, "warning: HOME is not set, so ~/NPU-TOKEN is not written") {
			t.Errorf("the gate with HOME unset does not warn:\n%s", o.stderr)
		}
		if code, _, stderr := run(t, r.command(npuHold, "--", "true")); code != 0 {
			t.Errorf("npu-hold -- true with HOME unset = %d: %s", code, stderr)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		home := dir(t, 0, 0o755)
		r := s.runner().with("HOME", home)
		o := s.runGate(t, r, "rohome")
		s.checkPass(t, r, o, noCgroup)
		if !strings.Contains(o.stderr, "warning: the token file "+home+"/NPU-TOKEN is not written") {
			t.Errorf("the gate with a read-only HOME does not warn:\n%s", o.stderr)
		}
		if code, _, stderr := run(t, r.command(npuHold, "--", "true")); code != 0 || !strings.Contains(stderr, "NPU-TOKEN is not written") {
			t.Errorf("npu-hold -- true with a read-only HOME = %d, want 0 and a warning: %s", code, stderr)
		}
	})
}

// hidepid is a runner in a PID and mount namespace of its own whose /proc
// is mounted hidepid=2: it sees its own processes only.
func (s site) hidepid() runner {
	r := s.runner()
	r.unshare = []string{"--pid", "--fork", "-m", "--propagation", "private"}
	r.pid1 = true
	r.setup = "mount -t proc -o hidepid=2 proc /proc"
	return r
}

// TestRootHidepid: with /proc mounted hidepid=2 the gate still holds and
// stops its own serve; another user's holder and a listener it cannot see
// are said to be out of sight, never taken for gone or for the serve.
func TestRootHidepid(t *testing.T) {
	needRoot(t)
	s := newSite(t)
	r := s.hidepid()
	r.build(t)
	_, npuHold := binaries(t)
	t.Run("run", func(t *testing.T) {
		s.checkPass(t, r, s.runGate(t, r, "out"), want{contain: "descendants", why: []string{"cgroup2: ", "freezer: "}})
	})
	t.Run("another user holds", func(t *testing.T) {
		holder := s.runner()
		holder.root = true
		cmd := holder.command(npuHold, "--", "sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			killMarked(s.mark)
			cmd.Wait()
		}()
		if !waitFor(func() bool { return len(marked(s.mark)) >= 3 }) {
			t.Fatalf("the holder did not start: %s", strings.Join(marked(s.mark), "; "))
		}
		code, stdout, stderr := run(t, r.command(npuHold, "status"))
		if code != 0 || !strings.Contains(stdout, "npu: held by root (pid ") || !strings.Contains(stdout, "not visible from here") || strings.Contains(stdout, "exited") {
			t.Errorf("npu-hold status = %d, %s%s; want held by root, not visible from here, not exited", code, stdout, stderr)
		}
		code, _, stderr = run(t, r.command(npuHold, "--wait", "1s", "--", "true"))
		if code != 75 || !strings.Contains(stderr, "it is held by root (pid ") || !strings.Contains(stderr, "not visible from here") || strings.Contains(stderr, "exited") {
			t.Errorf("npu-hold --wait 1s = %d, %s; want 75, held by root, not visible from here, not exited", code, stderr)
		}
	})
	t.Run("unseen listener", func(t *testing.T) {
		gate, _ := binaries(t)
		req := filepath.Join(s.work, "req")
		os.Remove(req)
		// The serve never listens; a stranger of root's answers its port.
		serve := fmt.Sprintf(`sh -c "echo {port} > %s; exec sleep 600"`, req)
		cmd := r.command(gate, "run", "--serve", serve, "--replies", "1", "--max-replies", "1", "--warmup", "0", "--serve-env-pass", "RUNNERENV_MARK", "--out", filepath.Join(s.work, "stranger"))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var port int
		if !waitFor(func() bool {
			b, _ := os.ReadFile(req)
			port, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return port > 0
		}) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the serve did not say its port:\n%s", out.String())
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "{}") })}
		go srv.Serve(ln)
		defer srv.Close()
		cmd.Wait()
		want := fmt.Sprintf("port %d is answered by a process of uid 0 that uid %d cannot see in /proc (another user's, or /proc mounted hidepid), not by the serve the gate started; it was not measured", port, runnerUID)
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(out.String(), want) {
			t.Errorf("the gate with an unseen stranger on its port = %d, want 1 and %q; it said:\n%s", cmd.ProcessState.ExitCode(), want, out.String())
		}
	})
}

// TestRootDeviceNode: a device node of a group the runner's user is not in:
// npu-hold doctor names the node, the group and the command that adds the
// user. /dev is a tmpfs of a private mount namespace.
func TestRootDeviceNode(t *testing.T) {
	needRoot(t)
	g, err := user.LookupGroup("video")
	if err != nil {
		t.Skipf("no group video to give the device node: %v", err)
	}
	s := newSite(t)
	r := s.runner()
	r.unshare = privateMounts
	r.setup = `mount -t tmpfs -o mode=755 tmpfs /dev
mknod -m 666 /dev/null c 1 3
mkdir /dev/accel
mknod -m 660 /dev/accel/accel0 c 1 3
chgrp ` + g.Gid + ` /dev/accel/accel0`
	r.build(t)
	_, npuHold := binaries(t)
	code, stdout, stderr := run(t, r.command(npuHold, "doctor"))
	want := fmt.Sprintf("FAIL  /dev/accel/accel0 does not open (permission denied): it is crw-rw----, group video, and nobody (uid %d) is not in that group: sudo usermod -aG video nobody, then log in again", runnerUID)
	if code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("npu-hold doctor = %d, want 1 and %q; it said:\n%s%s", code, want, stdout, stderr)
	}
}
