// Package release builds the released binaries reproducibly and writes the
// checksums file that the action's own tree carries: the action trusts a
// downloaded binary only when its SHA-256 is the one committed beside
// action.yml, for the very source it was built from.
package release

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Command is one released program.
type Command struct {
	Name string // the asset's name prefix: npu-serve-smoke
	Pkg  string // the package built: ./cmd/action
}

// Commands are the programs a release holds.
var Commands = []Command{
	{"npu-serve-smoke", "./cmd/action"},
	{"npu-hold", "./cmd/npu-hold"},
}

// Arches are the architectures a release holds for each of its systems,
// as GOARCH: a GitHub runner's RUNNER_ARCH X64 and ARM64.
var Arches = []string{"amd64", "arm64"}

// Target is a system and architecture a release holds binaries for.
type Target struct {
	OS   string // GOOS: linux or windows
	Arch string // GOARCH: amd64 or arm64
}

// Targets are the systems and architectures a release holds: linux and
// windows, each for every arch of Arches.
var Targets = []Target{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// Asset is the file name of a command's binary in a release:
// npu-serve-smoke_v1.2.3_linux_arm64, npu-serve-smoke_v1.2.3_windows_amd64.exe
// (Windows runs a program by its .exe name).
func (t Target) Asset(name, version string) string {
	a := name + "_" + version + "_" + t.OS + "_" + t.Arch
	if t.OS == "windows" {
		a += ".exe"
	}
	return a
}

func (t Target) String() string { return t.OS + "/" + t.Arch }

// Asset is the file name of a command's linux binary in a release:
// npu-serve-smoke_v1.2.3_linux_arm64.
func Asset(name, version, goarch string) string {
	return Target{"linux", goarch}.Asset(name, version)
}

var versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// CheckVersion says whether v is a release tag: v1.2.3, or v1.2.3-rc.1.
func CheckVersion(v string) error {
	if !versionRE.MatchString(v) {
		return fmt.Errorf("version %q is not a release tag like v1.2.3 or v1.2.3-rc.1", v)
	}
	return nil
}

// IsSource says whether a file (a slash path relative to the module root)
// goes into the source hash: every .go file except tests, and go.mod and
// go.sum, wherever they are.
func IsSource(rel string) bool {
	base := path.Base(rel)
	if base == "go.mod" || base == "go.sum" {
		return true
	}
	return strings.HasSuffix(base, ".go") && !strings.HasSuffix(base, "_test.go")
}

// SourceHash is the SHA-256 of the source a binary is built from. It is
// defined by the shell pipeline the action runs on its own tree, which needs
// no Go:
//
//	find . -path ./.git -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
//	  -not -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum
//
// that is, the SHA-256 of the lines "<sha256 of the file>  ./<path>\n" of
// those files, sorted by path bytewise.
func SourceHash(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && IsSource(rel) {
			if strings.ContainsAny(rel, "\\\n") {
				return fmt.Errorf("%s: a source file name with a backslash or a newline cannot be hashed as sha256sum lists it", rel)
			}
			files = append(files, "./"+rel)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	all := sha256.New()
	for _, f := range files {
		sum, err := FileSHA256(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(all, "%s  %s\n", sum, f)
	}
	return hex.EncodeToString(all.Sum(nil)), nil
}

// FileSHA256 is the hex SHA-256 of a file's bytes.
func FileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BuildFlags are go build's flags for a released binary: no cgo (a static
// binary), no file paths and no VCS stamp in it (the commit that adds the
// checksums must build the same bytes as the one before it), the version
// set by the linker, the symbol table and DWARF left out.
func BuildFlags(version string) []string {
	return []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w -X main.releaseVersion=" + version}
}

// BuildEnv is the environment of a released linux build: env (for PATH,
// HOME and the Go caches) with every setting that changes the bytes fixed.
func BuildEnv(env []string, goarch string) []string {
	return Target{"linux", goarch}.BuildEnv(env)
}

// BuildEnv is the environment of a released build for t: env (for PATH,
// HOME and the Go caches) with every setting that changes the bytes fixed,
// the same for every target but GOOS and GOARCH.
func (t Target) BuildEnv(env []string) []string {
	fixed := map[string]string{
		"GOOS": t.OS, "GOARCH": t.Arch, "CGO_ENABLED": "0",
		"GOAMD64": "v1", "GOARM64": "v8.0",
		"GOFLAGS": "", "GOEXPERIMENT": "", "GOTOOLCHAIN": "local",
		"GOWORK": "off",
	}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := fixed[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fixed)) {
		out = append(out, k+"="+fixed[k])
	}
	return out
}

// Build builds one command of the module in dir for linux/goarch into out.
func Build(ctx context.Context, dir string, c Command, version, goarch, out string) error {
	return Target{"linux", goarch}.Build(ctx, dir, c, version, out)
}

// Build builds one command of the module in dir for t into out, with the
// same flags for every target.
func (t Target) Build(ctx context.Context, dir string, c Command, version, out string) error {
	args := append([]string{"build"}, BuildFlags(version)...)
	args = append(args, "-o", out, c.Pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = t.BuildEnv(os.Environ())
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %v\n%s", c.Pkg, t, err, b)
	}
	return nil
}

// GoVersion is `go version`'s toolchain: go1.26.8.
func GoVersion(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOVERSION")
	cmd.Dir = dir
	cmd.Env = BuildEnv(os.Environ(), "amd64")
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %v", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Sums is a release's checksums file.
type Sums struct {
	Version string            // v1.2.3
	Go      string            // the toolchain that built it: go1.26.8
	Source  string            // SourceHash of the tree it was built from
	Files   map[string]string // asset name → hex SHA-256
}

// Write writes s as sha256sum lists files (sha256sum -c checks it; it skips
// the # lines), with the version, the toolchain and the source hash above.
func (s Sums) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# npu-serve-smoke %s: SHA-256 of the release's assets (go run ./cmd/release-sums %s)\n", s.Version, s.Version)
	fmt.Fprintf(&b, "# go %s\n", s.Go)
	fmt.Fprintf(&b, "# source %s\n", s.Source)
	for _, name := range slices.Sorted(maps.Keys(s.Files)) {
		fmt.Fprintf(&b, "%s  %s\n", s.Files[name], name)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var (
	headerRE = regexp.MustCompile(`^# npu-serve-smoke (\S+): `)
	goRE     = regexp.MustCompile(`^# go (go\S+)$`)
	sourceRE = regexp.MustCompile(`^# source ([0-9a-f]{64})$`)
	fileRE   = regexp.MustCompile(`^([0-9a-f]{64})  ([A-Za-z0-9._-]+)$`)
)

// ParseSums reads a checksums file as Write writes it.
func ParseSums(r io.Reader) (Sums, error) {
	s := Sums{Files: map[string]string{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := headerRE.FindStringSubmatch(line); m != nil {
			s.Version = m[1]
		} else if m := goRE.FindStringSubmatch(line); m != nil {
			s.Go = m[1]
		} else if m := sourceRE.FindStringSubmatch(line); m != nil {
			s.Source = m[1]
		} else if m := fileRE.FindStringSubmatch(line); m != nil {
			s.Files[m[2]] = m[1]
		} else if !strings.HasPrefix(line, "#") && line != "" {
			return Sums{}, fmt.Errorf("line %d: %q is neither a # line nor \"<sha256>  <asset>\"", n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return Sums{}, err
	}
	if s.Version == "" || s.Go == "" || s.Source == "" {
		return Sums{}, fmt.Errorf("no version, go or source line: not a checksums file of go run ./cmd/release-sums")
	}
	return s, nil
}

// Make builds every command for every target from the module in dir into
// out and returns the checksums of what it built.
func Make(ctx context.Context, dir, version, out string) (Sums, error) {
	if err := CheckVersion(version); err != nil {
		return Sums{}, err
	}
	src, err := SourceHash(dir)
	if err != nil {
		return Sums{}, err
	}
	gov, err := GoVersion(ctx, dir)
	if err != nil {
		return Sums{}, err
	}
	s := Sums{Version: version, Go: gov, Source: src, Files: map[string]string{}}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return Sums{}, err
	}
	for _, c := range Commands {
		for _, t := range Targets {
			name := t.Asset(c.Name, version)
			file := filepath.Join(out, name)
			if err := t.Build(ctx, dir, c, version, file); err != nil {
				return Sums{}, err
			}
			if s.Files[name], err = FileSHA256(file); err != nil {
				return Sums{}, err
			}
		}
	}
	return s, nil
}
