//go:build unix

// The CI user set-up .ci/run makes as root: Linux's.

package docs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/scripttest"
)

// nobody is the CI user these tests play: uid and gid 65534.
const nobody = 65534

// asNobody runs script in bash as root with .ci/asuser sourced and the
// user nobody's home at home (getent answers for it), and returns its
// output and error.
func asNobody(t *testing.T, home, script string) (string, error) {
	t.Helper()
	asuser, err := filepath.Abs(filepath.Join(root, ".ci/asuser"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `set -euo pipefail
getent() { echo "nobody:x:65534:65534:nobody:$HOME_OF_NOBODY:/bin/sh"; }
. "$ASUSER"
`+script)
	cmd.Env = append(os.Environ(), "ASUSER="+asuser, "HOME_OF_NOBODY="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// userHome makes a home for nobody that nobody may enter (t.TempDir's are
// root's, mode 700), beside a directory of root's.
func userHome(t *testing.T) (home, rootsDir string) {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home, rootsDir = filepath.Join(base, "home"), filepath.Join(base, "root's")
	for _, d := range []string{home, rootsDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(home, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	return home, rootsDir
}

// TestRootCIFollowsNoLinkOfTheUser: .ci/run, as root, empties the CI user's
// copy of the tree (~/ci/npu-serve-smoke) before each run. The tests ran as
// that user last time and may have left ~/ci a link to a directory of
// root's: what is removed is removed as the user, so root's files stay.
func TestRootCIFollowsNoLinkOfTheUser(t *testing.T) {
	scripttest.NeedRoot(t)
	home, rootsDir := userHome(t)
	keep := filepath.Join(rootsDir, "npu-serve-smoke", "keep")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("root's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, "ci")
	if err := os.Symlink(rootsDir, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	out, err := asNobody(t, home, `fresh_tree nobody "$HOME_OF_NOBODY/ci/npu-serve-smoke"`)
	if _, serr := os.Stat(keep); serr != nil {
		t.Fatalf("fresh_tree through the user's link ~/ci -> %s removed root's file: %v (%v: %s)", rootsDir, serr, err, out)
	}
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("fresh_tree through the user's link = %v, %q; want it refused as the user would be", err, out)
	}

	// The user's own tree is emptied and made again, the user's.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(home, "ci", "npu-serve-smoke")
	if out, err := asNobody(t, home, `asuser nobody mkdir -p "$HOME_OF_NOBODY/ci/npu-serve-smoke/old" &&
		fresh_tree nobody "$HOME_OF_NOBODY/ci/npu-serve-smoke"`); err != nil {
		t.Fatalf("fresh_tree of the user's own tree: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(tree, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("fresh_tree left the old tree's files: %v", err)
	}
	if fi, err := os.Stat(tree); err != nil || !fi.IsDir() || ownerOf(fi) != nobody {
		t.Errorf("fresh_tree's new tree: %v, %v; want a directory of the user's", fi, err)
	}
}

// TestRootCIPutsTheUsersToolsLast: a program the CI user left in ~/go/bin
// (its tools' directory, kept from one run to the next) never stands in for
// the system's go, git, tar or sh in what .ci/run runs as that user.
func TestRootCIPutsTheUsersToolsLast(t *testing.T) {
	scripttest.NeedRoot(t)
	home, _ := userHome(t)
	bin := filepath.Join(home, "go", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go", "git", "tar", "sh", "only-the-users"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := asNobody(t, home, `asuser nobody bash -c 'for p in go git tar sh only-the-users; do command -v "$p"; done'`)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Fields(out)
	if len(lines) != 5 {
		t.Fatalf("command -v go git tar sh only-the-users as the user = %q", out)
	}
	for _, p := range lines[:4] {
		if strings.HasPrefix(p, bin) {
			t.Errorf("as the CI user, %s is the one the user left in ~/go/bin: the system's must come first", p)
		}
	}
	if lines[4] != filepath.Join(bin, "only-the-users") {
		t.Errorf("a tool only in ~/go/bin = %q, want it found there (staticcheck, gremlins, act)", lines[4])
	}
}

func ownerOf(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
