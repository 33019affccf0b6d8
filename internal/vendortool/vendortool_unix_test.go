//go:build unix

package vendortool

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tool writes an executable named name in dir, printing its environment.
func tool(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexec env\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	first, second, empty := filepath.Join(root, "first"), filepath.Join(root, "second"), filepath.Join(root, "empty")
	os.MkdirAll(empty, 0o755)
	tool(t, second, "nvidia-smi")
	want := tool(t, first, "nvidia-smi")
	npu := tool(t, second, "npu-smi")
	tool(t, first, "other")
	// A relative entry is passed over: it names a directory by the gate's
	// working directory.
	t.Chdir(first)
	s := Find([]string{"PATH=.:" + empty + "::" + first + ":" + second})
	for name, want := range map[string]string{"nvidia-smi": want, "npu-smi": npu} {
		got, err := s.Look(name)
		if err != nil || got.Path != want || got.Name != name {
			t.Errorf("Look(%q) = %+v, %v; want %s", name, got, err, want)
		}
	}
	if got, err := s.Look("other"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(other), not a vendor's tool = %+v, %v; want not found", got, err)
	}
	if got, err := Find([]string{"PATH=."}).Look("nvidia-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(nvidia-smi) on PATH=. = %+v, %v; want not found", got, err)
	}
	if got, err := Find(nil).Look("nvidia-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(nvidia-smi) with no PATH = %+v, %v; want not found", got, err)
	}
}

// Found once: a tool put on PATH after Find, ahead of the one found, is
// not the one run.
func TestFindOnce(t *testing.T) {
	root := t.TempDir()
	early, late := filepath.Join(root, "early"), filepath.Join(root, "late")
	os.MkdirAll(late, 0o755)
	want := tool(t, early, "npu-smi")
	s := Find([]string{"PATH=" + late + ":" + early})
	tool(t, late, "npu-smi")
	tool(t, late, "nvidia-smi")
	if got, err := s.Look("npu-smi"); err != nil || got.Path != want {
		t.Errorf("Look(npu-smi) after another was put on PATH = %+v, %v; want %s", got, err, want)
	}
	if got, err := s.Look("nvidia-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(nvidia-smi) put on PATH after Find = %+v, %v; want not found", got, err)
	}
}

// A directory or a tool any user may write is passed over: another user's
// serve could have put its own there.
func TestFindWritable(t *testing.T) {
	root := t.TempDir()
	open, safe := filepath.Join(root, "open"), filepath.Join(root, "safe")
	tool(t, open, "nvidia-smi")
	want := tool(t, safe, "nvidia-smi")
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	loose := tool(t, filepath.Join(root, "loose"), "npu-smi")
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	s := Find([]string{"PATH=" + open + ":" + filepath.Dir(loose) + ":" + safe})
	if got, err := s.Look("nvidia-smi"); err != nil || got.Path != want {
		t.Errorf("Look(nvidia-smi) past a directory anyone writes = %+v, %v; want %s", got, err, want)
	}
	if got, err := s.Look("npu-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(npu-smi), a file anyone writes = %+v, %v; want not found", got, err)
	}
	// 0o775: the group's, not every user's.
	if err := os.Chmod(loose, 0o775); err != nil {
		t.Fatal(err)
	}
	if got, err := Find([]string{"PATH=" + filepath.Dir(loose)}).Look("npu-smi"); err != nil || got.Path != loose {
		t.Errorf("Look(npu-smi), mode 0775 = %+v, %v; want %s", got, err, loose)
	}
}

// The tools start with the allow-list of the environment Find was given:
// none of a step's secrets, file commands or inputs.
func TestCommandEnvironment(t *testing.T) {
	dir := t.TempDir()
	tool(t, dir, "nvidia-smi")
	environ := []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=/home/runner", "CUDA_VISIBLE_DEVICES=1", "LD_LIBRARY_PATH=/usr/local/nvidia/lib64",
		"GITHUB_TOKEN=ghs_secret", "INPUT_GITHUB-TOKEN=ghs_secret", "ACTIONS_RUNTIME_TOKEN=secret", "ACTIONS_ID_TOKEN_REQUEST_URL=http://x",
		"GITHUB_OUTPUT=/o", "GITHUB_ENV=/e", "GITHUB_PATH=/p", "GITHUB_STATE=/s", "GITHUB_STEP_SUMMARY=/m", "INPUT_SERVE=x", "OTHER=unasked"}
	t.Setenv("IN_THE_PROCESS", "not given")
	s := Find(environ)
	nv, err := s.Look("nvidia-smi")
	if err != nil {
		t.Fatal(err)
	}
	out, err := nv.Command(context.Background()).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	want := []string{"CUDA_VISIBLE_DEVICES=1", "HOME=/home/runner", "LD_LIBRARY_PATH=/usr/local/nvidia/lib64", "PATH=" + dir + ":/usr/bin:/bin"}
	// sh may add PWD of its own.
	got = slices.DeleteFunc(got, func(kv string) bool {
		return strings.HasPrefix(kv, "PWD=") || strings.HasPrefix(kv, "OLDPWD=") || strings.HasPrefix(kv, "SHLVL=") || strings.HasPrefix(kv, "_=")
	})
	if !slices.Equal(got, want) {
		t.Errorf("the tool's environment = %q, want %q", got, want)
	}
	if env := s.Env(); !slices.Equal(env, []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=/home/runner", "CUDA_VISIBLE_DEVICES=1", "LD_LIBRARY_PATH=/usr/local/nvidia/lib64"}) {
		t.Errorf("Env() = %q", env)
	}
	// An environment with nothing allowed is empty, never the process's.
	if env := Find([]string{"GITHUB_TOKEN=x"}).Env(); env == nil || len(env) != 0 {
		t.Errorf("Env() of nothing allowed = %#v, want empty", env)
	}
	if cmd := (Tool{Path: "/bin/true"}).Command(context.Background()); cmd.Env == nil {
		t.Error("a Tool's command with no environment inherits the process's (Env nil)")
	}
}

// A nil Set finds the tools on the process's PATH when one is looked up.
func TestNilSet(t *testing.T) {
	dir := t.TempDir()
	want := tool(t, dir, "npu-smi")
	t.Setenv("PATH", dir)
	t.Setenv("GITHUB_TOKEN", "ghs_secret")
	var s *Set
	if got, err := s.Look("npu-smi"); err != nil || got.Path != want {
		t.Errorf("nil Look(npu-smi) = %+v, %v; want %s", got, err, want)
	}
	if env := s.Env(); slices.Contains(env, "GITHUB_TOKEN=ghs_secret") || !slices.Contains(env, "PATH="+dir) {
		t.Errorf("nil Env() = %q", env)
	}
}

// A directory or tool another user owns is that user's to write, whatever
// its mode: a serve run as that user could put a tool of its own there.
// So is a directory below one any user may write (and no sticky bit
// keeps them from renaming what is in it). Root's and this user's are
// taken.
func TestFindOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	root := t.TempDir()
	theirs, mine := filepath.Join(root, "theirs"), filepath.Join(root, "mine")
	tool(t, theirs, "nvidia-smi")
	want := tool(t, mine, "nvidia-smi")
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// A tool of theirs in a directory of root's.
	other := tool(t, filepath.Join(root, "other"), "npu-smi")
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	s := Find([]string{"PATH=" + theirs + ":" + filepath.Dir(other) + ":" + mine})
	if got, err := s.Look("nvidia-smi"); err != nil || got.Path != want {
		t.Errorf("Look(nvidia-smi) past a directory nobody owns = %+v, %v; want %s", got, err, want)
	}
	if got, err := s.Look("npu-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(npu-smi), a tool nobody owns = %+v, %v; want not found", got, err)
	}
	// Below a directory anyone may write, without the sticky bit.
	open := filepath.Join(root, "open")
	below := tool(t, filepath.Join(open, "bin"), "npu-smi")
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if got, err := Find([]string{"PATH=" + filepath.Dir(below)}).Look("npu-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(npu-smi) below a directory anyone writes = %+v, %v; want not found", got, err)
	}
	// With the sticky bit (as /tmp), what is in it stays its owner's.
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if got, err := Find([]string{"PATH=" + filepath.Dir(below)}).Look("npu-smi"); err != nil || got.Path != below {
		t.Errorf("Look(npu-smi) below a sticky directory = %+v, %v; want %s", got, err, below)
	}
}

// A PATH entry that is a link is followed once, by Find: the tool found is
// the file it named then, and the link a serve may re-point later is not
// read again; nor is a link into a directory another user owns taken.
func TestFindLink(t *testing.T) {
	root := t.TempDir()
	real := tool(t, filepath.Join(root, "real"), "nvidia-smi")
	link := filepath.Join(root, "link")
	if err := os.Symlink(filepath.Join(root, "real"), link); err != nil {
		t.Fatal(err)
	}
	got, err := Find([]string{"PATH=" + link}).Look("nvidia-smi")
	if err != nil || got.Path != real {
		t.Errorf("Look(nvidia-smi) through a link = %+v, %v; want %s", got, err, real)
	}
	if cmd := got.Command(context.Background()); len(cmd.Args) == 0 || cmd.Args[0] != "nvidia-smi" {
		t.Errorf("the command's argv[0] = %q, want the tool's name", cmd.Args)
	}
	if os.Geteuid() != 0 {
		return
	}
	theirs := filepath.Join(root, "theirs")
	tool(t, theirs, "npu-smi")
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(root, "into")
	if err := os.Symlink(theirs, into); err != nil {
		t.Fatal(err)
	}
	if got, err := Find([]string{"PATH=" + into}).Look("npu-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(npu-smi) through a link into nobody's directory = %+v, %v; want not found", got, err)
	}
}

// In a user namespace, a file owned outside it shows as the overflow uid,
// which no process inside can be unless the namespace maps that uid too.
func TestOutside(t *testing.T) {
	for _, tt := range []struct {
		uid              uint32
		uidMap, overflow string
		want             bool
	}{
		{65534, "         0          0 4294967295\n", "65534\n", false}, // no namespace: it is nobody's
		{65534, "         0       1000          1\n", "65534\n", true},  // only 0 mapped
		{65534, "0 100000 65536\n", "65534\n", false},                   // 65534 mapped: nobody inside
		{65534, "0 100000 65534\n", "65534\n", true},                    // one short of it
		{65533, "0 100000 65534\n", "65534\n", false},                   // not the overflow uid
		{70000, "0 100000 65534\n", "70000\n", true},
		{65534, "0 100000 65534\n", "", true},   // unreadable: 65534
		{65534, "", "65534\n", false},           // no map read: not known
		{65534, "0 100000\n", "65534\n", false}, // a map not understood
		{65534, "0 1000 1\n65534 2000 1\n", "65534\n", false},
		{65534, "0 1000 1\n65535 2000 1\n", "65534\n", true},
	} {
		if got := outside(tt.uid, tt.uidMap, tt.overflow); got != tt.want {
			t.Errorf("outside(%d, %q, %q) = %v, want %v", tt.uid, tt.uidMap, tt.overflow, got, tt.want)
		}
	}
}
