//go:build linux

package runnerenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// unified is where this host mounts its cgroup v2 hierarchy beside the v1
// ones (a hybrid host); a pure v2 host mounts it at /sys/fs/cgroup.
const unified = "/sys/fs/cgroup/unified"

// needUnified skips where the host has no cgroup v2 hierarchy at unified.
func needUnified(t *testing.T) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(unified, &st); err != nil || st.Type != 0x63677270 { // CGROUP2_SUPER_MAGIC
		t.Skipf("%s is not a cgroup2 mount here (statfs: %v); these cases build on the hybrid layout", unified, err)
	}
}

// delegate makes a cgroup under the v2 hierarchy's root and gives it to the
// runner's user as systemd's Delegate=yes does: the directory and its
// cgroup.procs, cgroup.threads and cgroup.subtree_control chowned. It
// returns the cgroup's name; it is removed at the end of the test.
func delegate(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("runnerenv-%d-%d", os.Getpid(), time.Now().UnixNano())
	d := filepath.Join(unified, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Skipf("mkdir %s: %v (the kernel refused a cgroup)", d, err)
	}
	t.Cleanup(func() {
		// The supervisor removes the serve's cgroup; one left by a
		// failed run goes first.
		subs, _ := filepath.Glob(filepath.Join(d, "npu-serve-smoke-*"))
		// And one a hostile serve made beside its own ("ice").
		ice, _ := filepath.Glob(filepath.Join(d, "ice"))
		subs = append(subs, ice...)
		for _, p := range append(subs, d) {
			var err error
			for range 100 {
				if err = syscall.Rmdir(p); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Errorf("removing the delegated cgroup: rmdir %s: %v", p, err)
			}
		}
	})
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(d, f), runnerUID, runnerGID); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// enter is the setup line that moves the runner's shell into cgroup dir,
// as systemd starts a service in its own.
func enter(dir string) string { return "echo $$ > " + dir + "/cgroup.procs" }

// pureV2 makes a private mount namespace's /sys/fs/cgroup a cgroup2 mount,
// with no v1 hierarchy: a pure cgroup v2 host (Debian 12, Ubuntu 22.04,
// RHEL 9).
const pureV2 = "umount -R /sys/fs/cgroup\nmount -t cgroup2 cgroup2 /sys/fs/cgroup"

var privateMounts = []string{"-m", "--propagation", "private"}

// TestRootDelegated: a runner whose cgroup is its own (systemd's
// Delegate=yes) on this hybrid host: the serve gets a cgroup v2 of its own,
// under the runner's.
func TestRootDelegated(t *testing.T) {
	needRoot(t)
	needUnified(t)
	s := newSite(t)
	cg := delegate(t)
	r := s.runner()
	r.setup = enter(filepath.Join(unified, cg))
	r.build(t)
	w := want{contain: "cgroup2", cgroup: filepath.Join(unified, cg, "npu-serve-smoke-")}
	t.Run("run", func(t *testing.T) {
		s.checkPass(t, r, s.runGate(t, r, "out"), w)
	})
	t.Run("killed", func(t *testing.T) {
		s.killedGate(t, r)
	})
}

// TestRootHybrid: as root on this host, v1 controllers and a cgroup2 at
// unified: cgroup2 there; with unified unmounted (a legacy, v1-only
// layout), the freezer.
func TestRootHybrid(t *testing.T) {
	needRoot(t)
	needUnified(t)
	s := newSite(t)
	root := s.runner()
	root.root = true
	t.Run("cgroup2", func(t *testing.T) {
		s.checkPass(t, root, s.runGate(t, root, "hybrid"), want{contain: "cgroup2", cgroup: unified + "/npu-serve-smoke-"})
	})
	t.Run("v1-only", func(t *testing.T) {
		r := root
		r.unshare, r.setup = privateMounts, "umount "+unified
		r.build(t)
		s.checkPass(t, r, s.runGate(t, r, "v1"), want{contain: "freezer", cgroup: "/sys/fs/cgroup/freezer/npu-serve-smoke-", why: []string{"cgroup2: the hierarchy is not mounted"}})
	})
}

// TestRootPureV2: a host whose /sys/fs/cgroup is cgroup2, built in a
// private mount namespace: root makes a cgroup2; the runner's user without
// a cgroup of its own falls back to descendants, saying why; with one
// delegated, cgroup2 under it.
func TestRootPureV2(t *testing.T) {
	needRoot(t)
	needUnified(t)
	s := newSite(t)
	base := s.runner()
	base.unshare, base.setup = privateMounts, pureV2
	base.build(t)
	t.Run("root", func(t *testing.T) {
		r := base
		r.root = true
		s.checkPass(t, r, s.runGate(t, r, "root"), want{contain: "cgroup2", cgroup: "/sys/fs/cgroup/npu-serve-smoke-"})
	})
	t.Run("user", func(t *testing.T) {
		uid := "is not writable by uid " + strconv.Itoa(runnerUID)
		s.checkPass(t, base, s.runGate(t, base, "user"), want{contain: "descendants", why: []string{"cgroup2: /sys/fs/cgroup " + uid, "freezer: the hierarchy is not mounted"}})
	})
	t.Run("delegated", func(t *testing.T) {
		cg := delegate(t)
		r := base
		r.setup += "\n" + enter("/sys/fs/cgroup/"+cg)
		r.build(t)
		s.checkPass(t, r, s.runGate(t, r, "delegated"), want{contain: "cgroup2", cgroup: "/sys/fs/cgroup/" + cg + "/npu-serve-smoke-"})
		s.killedGate(t, r)
	})
}
