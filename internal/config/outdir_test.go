package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckPrivateDir(t *testing.T) {
	base := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := mk("mine/out", 0o755)
	if err := CheckPrivateDir(ok); err != nil {
		t.Errorf("a directory of this user's under its own: %v", err)
	}
	mk("sticky", os.ModeSticky|0o777)
	mk("sticky/out", 0o700)
	if err := CheckPrivateDir(filepath.Join(base, "sticky/out")); err != nil {
		t.Errorf("under a sticky directory: %v", err)
	}
	for _, c := range []struct{ dir, want string }{
		{mk("open/out", 0o755), "/open is writable by other users (mode 0777) without the sticky bit"},
		{mk("group/out", 0o755), "/group is writable by other users (mode 0775) without the sticky bit"},
		{mk("self", 0o757), "/self is writable by other users (mode 0757)"},
		{mk("selfsticky", os.ModeSticky|0o777), "/selfsticky is writable by other users (mode 0777)"},
	} {
		os.Chmod(filepath.Join(base, "open"), 0o777)
		os.Chmod(filepath.Join(base, "group"), 0o775)
		if err := CheckPrivateDir(c.dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckPrivateDir(%s) = %v, want %q", c.dir, err, c.want)
		}
	}
	// A symlink to a good directory from a bad place, and to a bad one
	// from a good place.
	os.Symlink(ok, filepath.Join(base, "open", "link"))
	if err := CheckPrivateDir(filepath.Join(base, "open", "link")); err == nil || !strings.Contains(err.Error(), "/open is writable") {
		t.Errorf("through a symlink in a directory others may write: %v", err)
	}
	os.Symlink(filepath.Join(base, "open", "out"), filepath.Join(base, "mine", "link"))
	if err := CheckPrivateDir(filepath.Join(base, "mine", "link")); err == nil || !strings.Contains(err.Error(), "/open is writable") {
		t.Errorf("a symlink leading under a directory others may write: %v", err)
	}
}

// A parent of --out owned by another user (uid 65534, made with chown):
// they could replace the out directory. Needs root to give a directory away.
func TestRootOutUnderAnotherUsersDirectory(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("plays another user (uid 65534: a directory made with chown): needs root, and uid %d is not; run as root: go test -run '^TestRoot' ./internal/config", uid)
	}
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(theirs, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := CheckPrivateDir(out)
	if err == nil || !strings.Contains(err.Error(), "/theirs belongs to") || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("CheckPrivateDir under another user's directory = %v, want it refused naming uid 65534", err)
	}
	// A neighbour's symlink in a sticky directory (as /tmp is), where the
	// runner's user means to make --out: it leads where the neighbour
	// chooses.
	sticky := filepath.Join(base, "tmp")
	if err := os.Mkdir(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(sticky, os.ModeSticky|0o777)
	mine := t.TempDir()
	link := filepath.Join(sticky, "out")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivateDir(link); err == nil || !strings.Contains(err.Error(), link+" belongs to") {
		t.Errorf("CheckPrivateDir through another user's symlink = %v, want it refused", err)
	}
	c := Default()
	c.Serve, c.Out = "true --port {port}", out
	if _, err := c.Check(func(f string) (string, error) { return f, nil }); err == nil || !strings.Contains(err.Error(), "--out "+out+": ") {
		t.Errorf("Check with --out under another user's directory = %v, want bad input naming --out", err)
	}
}
