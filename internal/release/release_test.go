package release

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sourceTree is a tree with every kind of file the hash must take or leave.
func sourceTree(t *testing.T) string {
	dir := wintest.TempDir(t)
	for name, text := range map[string]string{
		"go.mod":                 "module example.com/m\n\ngo 1.26\n",
		"go.sum":                 "",
		"main.go":                "package main\n\nfunc main() {}\n",
		"main_test.go":           "package main\n",
		"Z.go":                   "package main\n",
		"a b/c.go":               "package c\n",
		"sub/go.mod":             "module example.com/sub\n",
		"sub/x.go":               "package x\n",
		"testdata/y.go":          "package y\n",
		"README.md":              "not source\n",
		"checksums.txt":          "not source\n",
		".git/objects/z.go":      "git's own\n",
		"cmd/deep/er/nested.go":  "package er\n",
		"cmd/deep/er/nested.txt": "not source\n",
	} {
		writeFile(t, filepath.Join(dir, name), text)
	}
	wintest.Symlink(t, "main.go", filepath.Join(dir, "link.go"))
	return dir
}

// The action computes the hash in bash, with no Go: both must agree.
func TestSourceHashMatchesTheAction(t *testing.T) {
	wintest.SkipOnWine(t, "no bash on Wine's PATH (a Windows runner has Git for Windows' bash)")
	dir := sourceTree(t)
	got, err := SourceHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "../../gate-binary.sh", "source-hash", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gate-binary.sh source-hash: %v\n%s", err, out)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Errorf("SourceHash(tree) = %s, want the action's %s", got, want)
	}

	// Each source file counts; a test, a text file, .git do not.
	for _, c := range []struct {
		file    string
		changes bool
	}{
		{"main.go", true}, {"go.sum", true}, {"sub/x.go", true}, {"a b/c.go", true},
		{"main_test.go", false}, {"README.md", false}, {"checksums.txt", false}, {".git/objects/z.go", false},
	} {
		writeFile(t, filepath.Join(dir, c.file), "changed\n")
		after, err := SourceHash(dir)
		if err != nil {
			t.Fatal(err)
		}
		if changed := after != got; changed != c.changes {
			t.Errorf("SourceHash changed = %v after %s changed, want %v", changed, c.file, c.changes)
		}
		got = after
	}
}

func TestIsSource(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"main.go", true}, {"cmd/action/cli.go", true}, {"go.mod", true}, {"sub/go.sum", true},
		{"cmd/action/cli_test.go", false}, {"action.yml", false}, {"go.mod.bak", false}, {"x.gox", false},
	} {
		if got := IsSource(c.rel); got != c.want {
			t.Errorf("IsSource(%q) = %v, want %v", c.rel, got, c.want)
		}
	}
}

func TestTargetAsset(t *testing.T) {
	for _, c := range []struct {
		t    Target
		want string
	}{
		{Target{"linux", "amd64"}, "npu-serve-smoke_v1.2.3_linux_amd64"},
		{Target{"linux", "arm64"}, "npu-serve-smoke_v1.2.3_linux_arm64"},
		{Target{"windows", "amd64"}, "npu-serve-smoke_v1.2.3_windows_amd64.exe"},
		{Target{"windows", "arm64"}, "npu-serve-smoke_v1.2.3_windows_arm64.exe"},
	} {
		if got := c.t.Asset("npu-serve-smoke", "v1.2.3"); got != c.want {
			t.Errorf("%v.Asset(npu-serve-smoke, v1.2.3) = %q, want %q", c.t, got, c.want)
		}
	}
	if got, want := Asset("npu-hold", "v1.2.3", "arm64"), "npu-hold_v1.2.3_linux_arm64"; got != want {
		t.Errorf("Asset(npu-hold, v1.2.3, arm64) = %q, want %q", got, want)
	}
	// Every asset name is one ParseSums takes back.
	for _, tg := range Targets {
		name := tg.Asset("npu-hold", "v1.2.3")
		text := "# npu-serve-smoke v1.2.3: x\n# go go1.26.8\n# source " + strings.Repeat("ab", 32) + "\n" + strings.Repeat("0", 64) + "  " + name + "\n"
		s, err := ParseSums(strings.NewReader(text))
		if err != nil || s.Files[name] == "" {
			t.Errorf("ParseSums of a line for %s = %+v, %v, want it read", name, s, err)
		}
	}
}

// A release holds linux and windows binaries, each for every arch a GitHub
// runner reports (X64, ARM64).
func TestTargets(t *testing.T) {
	var want []Target
	for _, goos := range []string{"linux", "windows"} {
		for _, arch := range Arches {
			want = append(want, Target{goos, arch})
		}
	}
	if diff := cmp.Diff(want, Targets); diff != "" {
		t.Errorf("Targets (-want +got):\n%s", diff)
	}
}

// Every target is built with the same settings but GOOS and GOARCH.
func TestTargetBuildEnv(t *testing.T) {
	env := []string{"PATH=/usr/bin", "GOOS=plan9", "CGO_ENABLED=1", "GOFLAGS=-race", "HOME=/h"}
	lin := BuildEnv(env, "arm64")
	if diff := cmp.Diff(Target{"linux", "arm64"}.BuildEnv(env), lin); diff != "" {
		t.Errorf("BuildEnv(env, arm64) is not linux/arm64's (-target +BuildEnv):\n%s", diff)
	}
	win := Target{"windows", "arm64"}.BuildEnv(env)
	want := []string{"PATH=/usr/bin", "HOME=/h", "CGO_ENABLED=0", "GOAMD64=v1", "GOARCH=arm64", "GOARM64=v8.0",
		"GOEXPERIMENT=", "GOFLAGS=", "GOOS=windows", "GOTOOLCHAIN=local", "GOWORK=off"}
	if diff := cmp.Diff(want, win); diff != "" {
		t.Errorf("windows/arm64 BuildEnv (-want +got):\n%s", diff)
	}
	for i := range lin {
		if lin[i] != win[i] && lin[i] != "GOOS=linux" {
			t.Errorf("linux and windows builds differ in %q and %q: only GOOS may", lin[i], win[i])
		}
	}
}

func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{
		{"v1.2.3", true}, {"v0.1.0-rc.1", true}, {"v10.20.30", true},
		{"1.2.3", false}, {"v1.2", false}, {"v1.2.3/../x", false}, {"main", false}, {"", false}, {"v1.2.3 ", false},
	} {
		if err := CheckVersion(c.v); (err == nil) != c.ok {
			t.Errorf("CheckVersion(%q) = %v, want ok %v", c.v, err, c.ok)
		}
	}
}

func TestSumsRoundTrip(t *testing.T) {
	s := Sums{Version: "v1.2.3", Go: "go1.26.8", Source: strings.Repeat("ab", 32), Files: map[string]string{
		Asset("npu-serve-smoke", "v1.2.3", "arm64"):            strings.Repeat("01", 32),
		Asset("npu-hold", "v1.2.3", "amd64"):                   strings.Repeat("ef", 32),
		Target{"windows", "arm64"}.Asset("npu-hold", "v1.2.3"): strings.Repeat("cd", 32),
	}}
	var b bytes.Buffer
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "# npu-serve-smoke v1.2.3: SHA-256 of the release's assets (go run ./cmd/release-sums v1.2.3)\n" +
		"# go go1.26.8\n" +
		"# source " + strings.Repeat("ab", 32) + "\n" +
		strings.Repeat("ef", 32) + "  npu-hold_v1.2.3_linux_amd64\n" +
		strings.Repeat("cd", 32) + "  npu-hold_v1.2.3_windows_arm64.exe\n" +
		strings.Repeat("01", 32) + "  npu-serve-smoke_v1.2.3_linux_arm64\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Sums.Write (-want +got):\n%s", diff)
	}
	back, err := ParseSums(&b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("ParseSums(Write(s)) (-s +parsed):\n%s", diff)
	}
}

func TestParseSumsRefuses(t *testing.T) {
	head := "# npu-serve-smoke v1.2.3: x\n# go go1.26.8\n# source " + strings.Repeat("ab", 32) + "\n"
	for _, text := range []string{
		"",
		"# go go1.26.8\n# source " + strings.Repeat("ab", 32) + "\n",
		head + strings.Repeat("0", 63) + "  npu-hold_v1.2.3_linux_amd64\n",
		head + strings.Repeat("0", 64) + " npu-hold_v1.2.3_linux_amd64\n",
		head + strings.Repeat("0", 64) + "  ../npu-hold\n",
	} {
		if s, err := ParseSums(strings.NewReader(text)); err == nil {
			t.Errorf("ParseSums(%q) = %+v, want an error", text, s)
		}
	}
}

// The same source gives the same bytes, wherever it is and whatever git
// knows of it; another version gives other bytes.
func TestBuildReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds")
	}
	wintest.SkipOnWine(t, "no git and no go on Wine's PATH")
	src := "package main\n\nimport \"fmt\"\n\nvar releaseVersion string\n\nfunc main() { fmt.Println(releaseVersion) }\n"
	var dirs []string
	for range 2 {
		dir := wintest.TempDir(t)
		writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/m\n\ngo 1.26\n")
		writeFile(t, filepath.Join(dir, "cmd/m/main.go"), src)
		dirs = append(dirs, dir)
	}
	// One of them a git repository with a commit: no VCS stamp may differ.
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dirs[1]
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	c := Command{"m", "./cmd/m"}
	ctx := context.Background()
	for _, tg := range []Target{{"linux", "arm64"}, {"windows", "amd64"}} {
		t.Run(tg.OS+"-"+tg.Arch, func(t *testing.T) {
			var sums []string
			for i, build := range []struct{ dir, version string }{{dirs[0], "v1.0.0"}, {dirs[1], "v1.0.0"}, {dirs[1], "v1.0.1"}} {
				out := filepath.Join(wintest.TempDir(t), tg.Asset("m", build.version))
				if err := tg.Build(ctx, build.dir, c, build.version, out); err != nil {
					t.Fatal(err)
				}
				sum, err := FileSHA256(out)
				if err != nil {
					t.Fatal(err)
				}
				sums = append(sums, sum)
				if i == 2 && sum == sums[1] {
					t.Errorf("v1.0.1 built the same bytes as v1.0.0: the version is not in the binary")
				}
				if i == 0 {
					// The executable format of the target's system: ELF or PE.
					b, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					magic := map[string]string{"linux": "\x7fELF", "windows": "MZ"}[tg.OS]
					if !bytes.HasPrefix(b, []byte(magic)) {
						t.Errorf("%s built a binary that starts %q, want %q", tg, b[:min(4, len(b))], magic)
					}
				}
			}
			if sums[0] != sums[1] {
				t.Errorf("the same source built in two places, one a git repository: SHA-256 %s and %s, want the same", sums[0], sums[1])
			}
		})
	}
}
