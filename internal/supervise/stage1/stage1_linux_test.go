package stage1

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParse(t *testing.T) {
	env := func(contain string) func(string) string {
		return func(k string) string {
			if k == ContainEnv {
				return contain
			}
			return ""
		}
	}
	for _, tc := range []struct {
		args    []string
		contain string // the environment's
		argv    []string
		held    int
		decline bool
	}{
		// As the gate writes it.
		{args: []string{"--held", "1", "--", "serve", "--port", "8000"}, argv: []string{"serve", "--port", "8000"}, held: 1},
		{args: []string{"--held", "0", "--", "serve"}, argv: []string{"serve"}},
		{args: []string{"--held", "2", "--contain", "cgroup2", "--", "serve"}, argv: []string{"serve"}, held: 2},
		{args: []string{"--held", "1", "--contain", "auto", "--", "serve"}, argv: []string{"serve"}, held: 1},
		{args: []string{"--held", "1", "--", "serve"}, contain: "auto", argv: []string{"serve"}, held: 1},
		{args: []string{"--held", "1", "--", "serve"}, contain: "cgroup2", argv: []string{"serve"}, held: 1},
		// The serve's own flags are its own, --held and -- included.
		{args: []string{"--", "serve", "--held", "x", "--"}, argv: []string{"serve", "--held", "x", "--"}},
		// The flag given wins over the environment, as in the supervisor.
		{args: []string{"--contain", "cgroup2", "--", "serve"}, contain: "freezer", argv: []string{"serve"}},
		// Another mechanism, a terminal, or a form the flag package reads
		// but this does not: the supervisor's.
		{args: []string{"--held", "1", "--contain", "freezer", "--", "serve"}, decline: true},
		{args: []string{"--held", "1", "--contain", "descendants", "--", "serve"}, decline: true},
		{args: []string{"--held", "1", "--", "serve"}, contain: "freezer", decline: true},
		{args: []string{"--held", "1", "--", "serve"}, contain: "Cgroup2", decline: true},
		{args: []string{"--held", "1", "--foreground", "--", "serve"}, decline: true},
		{args: []string{"--held=1", "--", "serve"}, decline: true},
		{args: []string{"-held", "1", "--", "serve"}, decline: true},
		{args: []string{"--held", "010", "--", "serve"}, decline: true}, // 8 to the flag package
		{args: []string{"--held", "0x1", "--", "serve"}, decline: true},
		{args: []string{"--held", "+1", "--", "serve"}, decline: true},
		{args: []string{"--held", "-1", "--", "serve"}, decline: true},
		{args: []string{"--held", "--", "serve"}, decline: true},
		{args: []string{"--contain", "--", "serve"}, decline: true},
		{args: []string{"--held", "1", "--"}, decline: true},
		{args: []string{"--held", "1", "serve"}, decline: true},
		{args: []string{"--held"}, decline: true},
		{args: nil, decline: true},
	} {
		argv, held, why := Parse(tc.args, env(tc.contain))
		if tc.decline {
			if why == "" {
				t.Errorf("Parse(%q) with %s=%q = %q, %d; want it declined", tc.args, ContainEnv, tc.contain, argv, held)
			}
			continue
		}
		if why != "" || !cmp.Equal(argv, tc.argv) || held != tc.held {
			t.Errorf("Parse(%q) with %s=%q = %q, %d, %q; want %q, %d", tc.args, ContainEnv, tc.contain, argv, held, why, tc.argv, tc.held)
		}
	}
}

// TestLookPathAsExec holds LookPath to exec.LookPath: the same path where
// it finds one, nothing where exec.LookPath finds nothing.
func TestLookPathAsExec(t *testing.T) {
	d := t.TempDir()
	a, b, c, l := filepath.Join(d, "a"), filepath.Join(d, "b"), filepath.Join(d, "c"), filepath.Join(d, "l")
	for _, dir := range []string{a, b, c, l, filepath.Join(c, "serve")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(name, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(name, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	write(filepath.Join(a, "serve"), 0o755)
	write(filepath.Join(b, "serve"), 0o644)
	write(filepath.Join(b, "other"), 0o700)
	if err := os.Symlink(filepath.Join(a, "serve"), filepath.Join(l, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(b, "serve"), filepath.Join(l, "dangling-mode")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(d, "nowhere"), filepath.Join(l, "dangling")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, path string
		want       string // "" for nothing found
		decline    bool
	}{
		{file: "serve", path: a, want: filepath.Join(a, "serve")},
		{file: "serve", path: b + ":" + a, want: filepath.Join(a, "serve")}, // b's is not executable
		{file: "serve", path: c + ":" + a, want: filepath.Join(a, "serve")}, // c's is a directory
		{file: "serve", path: filepath.Join(d, "none") + ":" + a, want: filepath.Join(a, "serve")},
		{file: "serve", path: a + ":" + b, want: filepath.Join(a, "serve")},
		{file: "other", path: a + ":" + b, want: filepath.Join(b, "other")},
		{file: "link", path: l, want: filepath.Join(l, "link")},
		{file: "dangling-mode", path: l},
		{file: "dangling", path: l + ":" + a},
		{file: "serve", path: b},
		{file: "serve", path: c},
		{file: "serve", path: ""},
		{file: "", path: a},
		{file: ".", path: a},
		{file: "..", path: a},
		{file: filepath.Join(a, "serve"), path: "", want: filepath.Join(a, "serve")},
		{file: filepath.Join(a, "serve"), path: b, want: filepath.Join(a, "serve")},
		{file: filepath.Join(b, "serve"), path: a},
		{file: filepath.Join(c, "serve"), path: a},
		// exec.LookPath's own rules: a relative entry ("" is ".") found
		// is an error (ErrDot), a path it cleans.
		{file: "serve", path: "rel:" + a, decline: true},
		{file: "serve", path: ":" + a, decline: true},
		{file: "serve", path: a + ":", want: filepath.Join(a, "serve")}, // found before the empty entry
		{file: "serve", path: a + "/", decline: true},
		{file: "serve", path: a + "/.", decline: true},
		{file: "serve", path: filepath.Join(d, "c") + "/../a", decline: true},
		{file: "serve", path: "/" + a, decline: true},
	} {
		t.Setenv("PATH", tc.path)
		got, found, why := LookPath(tc.file, tc.path)
		if tc.decline {
			if why == "" {
				t.Errorf("LookPath(%q, %q) = %q, %v; want it declined", tc.file, tc.path, got, found)
			}
			continue
		}
		if why != "" || found != (tc.want != "") || (found && got != tc.want) {
			t.Errorf("LookPath(%q, %q) = %q, %v, %q; want %q", tc.file, tc.path, got, found, why, tc.want)
			continue
		}
		lp, err := exec.LookPath(tc.file)
		if found && (err != nil || lp != got) {
			t.Errorf("LookPath(%q, %q) = %q; exec.LookPath: %q, %v", tc.file, tc.path, got, lp, err)
		}
		if !found && err == nil {
			t.Errorf("LookPath(%q, %q) found nothing; exec.LookPath: %q", tc.file, tc.path, lp)
		}
	}
}

func TestClean(t *testing.T) {
	for _, p := range []string{"/", "/a", "/a/b", "/sys/fs/cgroup/unified", "/a/.b", "/a/..b", "/a b"} {
		if !clean(p) || filepath.Clean(p) != p {
			t.Errorf("clean(%q) = %v, filepath.Clean %q; want it clean", p, clean(p), filepath.Clean(p))
		}
	}
	for _, p := range []string{"", "a", "a/b", "./a", "//", "/a/", "/a//b", "/a/./b", "/a/../b", "/.", "/..", "/a/."} {
		if clean(p) {
			t.Errorf("clean(%q) = true, want false", p)
		}
	}
}

func TestStringHelpers(t *testing.T) {
	for _, s := range []string{"", "a", "a b", " a  b ", "0::/x\n1:cpu:/", "\n\n", "x - y - z"} {
		if got, want := split(s, '\n'), strings.Split(s, "\n"); !cmp.Equal(got, want) {
			t.Errorf("split(%q) = %q, want %q", s, got, want)
		}
		if got, want := fields(s), strings.Fields(s); !strings.Contains(s, "\n") && !cmp.Equal(got, want, cmpopts.EquateEmpty()) {
			t.Errorf("fields(%q) = %q, want %q", s, got, want)
		}
		for _, sub := range []string{"", " - ", "a", "/", "::"} {
			if got, want := index(s, sub), strings.Index(s, sub); got != want {
				t.Errorf("index(%q, %q) = %d, want %d", s, sub, got, want)
			}
		}
	}
}

// TestLookPathAsExecRandom: wherever LookPath answers (why == ""), it
// answers as exec.LookPath, over random PATHs of a tree with files of every
// kind (kept from an attack on the first stage; it ran 20,000 of them).
func TestLookPathAsExecRandom(t *testing.T) {
	d := t.TempDir()
	mk := func(p string, mode os.FileMode) {
		t.Helper()
		name := filepath.Join(d, p)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(d, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(d, target), filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/x", 0o755)
	mk("b/x", 0o644)
	mk("c/y", 0o100)
	mk("e/x", 0o010)
	if err := os.MkdirAll(filepath.Join(d, "dir/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	link("a", "link")
	link("a/x", "f/x")
	link("nowhere", "g/x")
	entries := []string{d + "/a", d + "/b", d + "/c", d + "/dir", d + "/link", d + "/f", d + "/g", d + "/e", d + "/a/x", d + "/missing", "/", d + "/a/", d, d + "//a", "", "a", "."}
	files := []string{"x", "y", "a/x", d + "/a/x", d + "/b/x", d + "/dir", "./x", "x/", d + "/a/x/", "../x", "", ".", ".."}
	t.Chdir(filepath.Join(d, "a"))
	r := rand.New(rand.NewPCG(1, 2))
	answered := 0
	for range 3000 {
		var es []string
		for range r.IntN(4) {
			es = append(es, entries[r.IntN(len(entries))])
		}
		pathEnv := strings.Join(es, ":")
		file := files[r.IntN(len(files))]
		p, found, why := LookPath(file, pathEnv)
		if why != "" {
			continue
		}
		answered++
		t.Setenv("PATH", pathEnv)
		ep, err := exec.LookPath(file)
		if found != (err == nil) || found && p != ep {
			t.Fatalf("LookPath(%q, %q) = %q, %v; exec.LookPath = %q, %v", file, pathEnv, p, found, ep, err)
		}
	}
	if answered < 1000 {
		t.Errorf("LookPath answered %d of 3000, want most: the test compares nothing", answered)
	}
}
