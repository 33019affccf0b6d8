package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

// BenchmarkGateBinary times the action's first step (gate-binary.sh)
// and an exec of the binary it gives, on each of its paths:
//
//	release-cold  a fresh tool cache, no Go on PATH: download from a loopback
//	              fake of the release server, verify, exec
//	release-warm  the cached binary, verified again, exec
//	source-warm   a fresh tool cache, Go's build cache warm: go build, exec
//	source-cold   Go's build cache empty too (-benchtime 1x: a minute)
//
// go test -run '^$' -bench GateBinary/release -benchtime 20x ./cmd/action
// go test -run '^$' -bench GateBinary/source -benchtime 1x ./cmd/action
func BenchmarkGateBinary(b *testing.B) {
	if _, err := exec.LookPath("bash"); err != nil {
		b.Skip("no bash")
	}
	dir := b.TempDir()
	r := newReleased(b, dir)
	rel := &fakeReleases{assets: map[string][]byte{}, hits: map[string]int{}}
	rel.set("/acme/npu-serve-smoke/releases/download/"+r.version+"/"+r.asset, r.good)
	srv := httptest.NewServer(rel)
	defer srv.Close()
	noGo := pathWithoutGo(b)

	step := func(b *testing.B, tree, cache string, env []string) {
		bin, o, err := runGateBinary(b, r, tree, cache, srv.URL, env)
		if err != nil {
			b.Fatalf("gate-binary.sh: %v\n%s", err, o)
		}
		if o, err := exec.Command(bin, "help").CombinedOutput(); err != nil {
			b.Fatalf("%s help: %v\n%s", bin, err, o)
		}
	}

	b.Run("release-cold", func(b *testing.B) {
		for b.Loop() {
			step(b, r.tree, b.TempDir(), noGo)
		}
	})
	b.Run("release-warm", func(b *testing.B) {
		cache := b.TempDir()
		step(b, r.tree, cache, noGo)
		for b.Loop() {
			step(b, r.tree, cache, noGo)
		}
	})
	b.Run("source-warm", func(b *testing.B) {
		step(b, r.branch, b.TempDir(), withGo())
		for b.Loop() {
			step(b, r.branch, b.TempDir(), withGo())
		}
	})
	b.Run("source-cold", func(b *testing.B) {
		for b.Loop() {
			step(b, r.branch, b.TempDir(), append(withGo(), "GOCACHE="+b.TempDir()))
		}
	})
}

// runGateBinary runs gate-binary.sh of tree as the action's first
// step runs it, on a runner of this machine's arch, with the release
// download URL on the fake at url. It returns the binary it gives and what
// it said.
func runGateBinary(t testing.TB, r released, tree, cache, url string, env []string) (string, string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "output")
	cmd := exec.Command("bash", filepath.Join(tree, "gate-binary.sh"))
	cmd.Env = append(env,
		"ACTION_PATH="+tree, "ACTION_REPOSITORY=acme/npu-serve-smoke", "ACTION_REF="+r.version,
		"RUNNER_OS=Linux", "RUNNER_ARCH="+map[string]string{"x64": "X64", "arm64": "ARM64"}[r.arch],
		"RUNNER_TOOL_CACHE="+cache, "RUNNER_TEMP="+t.TempDir(), "GITHUB_OUTPUT="+out,
		"NPU_SERVE_SMOKE_DOWNLOAD_URL="+url+"/acme/npu-serve-smoke/releases/download")
	o, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(out)
	return strings.TrimSpace(strings.TrimPrefix(string(b), "bin=")), string(o), err
}

// withGo is the environment of a runner with Go, its build settings a
// release build's (no cgo, GOAMD64=v1, ...): a build from source by
// gate-binary.sh then shares the compiled packages of the package's
// release build (releaseBuild) in Go's build cache, not a second build of
// every dependency. Which binary runs is what these tests check, and a
// runner's Go may be set up either way.
func withGo() []string { return release.BuildEnv(os.Environ(), runtime.GOARCH) }

// A runner with wget and shasum, and neither curl nor sha256sum (nor Go):
// the same download, verified the same way; a swapped asset refused.
//
// The TestGateBinary tests run beside each other (t.Parallel): each has its
// own trees, tool cache and fake release server, and the release build they
// share is built once (releaseBuild).
func TestGateBinaryWgetShasum(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a release build")
	}
	t.Parallel()
	bin := t.TempDir()
	for _, tool := range []string{"bash", "find", "sort", "xargs", "cut", "sed", "awk", "head", "mktemp", "mkdir", "rm", "chmod", "mv", "cp", "cat", "wget", "shasum", "perl"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + bin, "HOME=" + t.TempDir()}
	r := newReleased(t, t.TempDir())
	rel := &fakeReleases{assets: map[string][]byte{}, hits: map[string]int{}}
	path := "/acme/npu-serve-smoke/releases/download/" + r.version + "/" + r.asset
	rel.set(path, r.good)
	srv := httptest.NewServer(rel)
	defer srv.Close()

	cache := t.TempDir()
	got, o, err := runGateBinary(t, r, r.tree, cache, srv.URL, env)
	if err != nil || got == "" || strings.HasPrefix(got, cache) || !strings.Contains(o, "downloaded from "+srv.URL+path+" and verified") {
		t.Fatalf("gate-binary.sh with wget and shasum = %q, %v, want a checked copy outside the tool cache:\n%s", got, err, o)
	}
	for _, f := range []string{got, filepath.Join(cache, "npu-serve-smoke", "9.9.9", r.arch, "npu-serve-smoke")} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, r.good) {
			t.Errorf("%s is not the release's binary: %v", f, err)
		}
	}

	bad := bytes.Clone(r.good)
	bad[0] ^= 1
	rel.set(path, bad)
	cache = t.TempDir()
	got, o, err = runGateBinary(t, r, r.tree, cache, srv.URL, env)
	if err == nil || got != "" || !strings.Contains(o, "The download is refused") {
		t.Errorf("gate-binary.sh on a swapped asset = %q, %v, want refused:\n%s", got, err, o)
	}
	if _, err := os.Stat(filepath.Join(cache, "npu-serve-smoke", "9.9.9", r.arch+".complete")); err == nil {
		t.Errorf("a refused download left a .complete marker")
	}
}

// The build-from-source path runs only what it built in this job: a binary
// an earlier job planted in the tool cache (at the path an older version of
// the action kept its build, or anywhere under it) is never chosen.
func TestGateBinaryIgnoresPlantedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a release build")
	}
	t.Parallel()
	r := newReleased(t, t.TempDir())
	cache := t.TempDir()
	key := sourceKey(t, r.branch)
	planted := "#!/bin/sh\necho PLANTED BINARY RAN\n"
	for _, dir := range []string{filepath.Join(cache, "npu-serve-smoke", key), filepath.Join(cache, "npu-serve-smoke", "9.9.9", r.arch)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "npu-serve-smoke"), []byte(planted), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		got, o, err := runGateBinary(t, r, r.branch, cache, "http://127.0.0.1:1", withGo())
		if err != nil || !strings.HasPrefix(got, os.TempDir()) || strings.HasPrefix(got, cache) || !strings.Contains(o, "built from source into ") {
			t.Fatalf("gate-binary.sh run %d = %q, %v, want a build of its own outside the tool cache:\n%s", i+1, got, err, o)
		}
		h, err := exec.Command(got, "help").CombinedOutput()
		if err != nil || bytes.Contains(h, []byte("PLANTED")) || !bytes.Contains(h, []byte("npu-serve-smoke")) {
			t.Errorf("run %d: %s help = %v:\n%s, want the gate's help", i+1, got, err, h)
		}
	}
}

// sourceKey is the key older versions of gate-binary.sh kept their build
// under in the tool cache: any job could compute it.
func sourceKey(t *testing.T, tree string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", `{ go version; find . -path ./.git -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -not -name '*_test.go' -print | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16`)
	cmd.Dir = tree
	o, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(o))
}

// The cached release binary is shared with every job of the runner's
// user, and the action checks it in one step and runs it in the next. What
// runs is the copy the check read, in this job's own directory: a cache
// swapped after the step (as another job could) is not what runs, and a
// cache swapped before it is refused and downloaded again. While another
// process swaps the cache back and forth, every run still gets the
// release's bytes.
func TestGateBinaryRunsTheCheckedCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a release build")
	}
	t.Parallel()
	r := newReleased(t, t.TempDir())
	rel := &fakeReleases{assets: map[string][]byte{}, hits: map[string]int{}}
	rel.set("/acme/npu-serve-smoke/releases/download/"+r.version+"/"+r.asset, r.good)
	srv := httptest.NewServer(rel)
	defer srv.Close()
	noGo := pathWithoutGo(t)
	planted := []byte("#!/bin/sh\necho PLANTED BINARY RAN\n")
	cache := t.TempDir()
	cached := filepath.Join(cache, "npu-serve-smoke", "9.9.9", r.arch, "npu-serve-smoke")
	// swap replaces the cached file as another job would: a new file
	// renamed over it.
	swap := func(t *testing.T, b []byte) {
		tmp := cached + ".swap"
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cached); err != nil {
			t.Fatal(err)
		}
	}
	// runs is what exec of bin runs, and bin's bytes then.
	runs := func(t *testing.T, bin string) {
		t.Helper()
		if b, err := os.ReadFile(bin); err != nil || !bytes.Equal(b, r.good) {
			t.Errorf("%s is not the release's binary (%v)", bin, err)
		}
		h, err := exec.Command(bin, "help").CombinedOutput()
		if err != nil || bytes.Contains(h, []byte("PLANTED")) || !bytes.Contains(h, []byte("npu-serve-smoke")) {
			t.Errorf("%s help = %v:\n%s, want the gate's help", bin, err, h)
		}
	}
	if bin, o, err := runGateBinary(t, r, r.tree, cache, srv.URL, noGo); err != nil || !strings.Contains(o, "downloaded from ") {
		t.Fatalf("the first run = %q, %v, want a download:\n%s", bin, err, o)
	}

	t.Run("swapped after the check", func(t *testing.T) {
		bin, o, err := runGateBinary(t, r, r.tree, cache, srv.URL, noGo)
		if err != nil || !strings.Contains(o, "cached and verified") {
			t.Fatalf("gate-binary.sh = %q, %v, want the cached release:\n%s", bin, err, o)
		}
		swap(t, planted)
		if strings.HasPrefix(bin, cache) {
			t.Errorf("gate-binary.sh gave %s, in the shared tool cache: the file checked is not the file run", bin)
		}
		runs(t, bin)
		if fi, err := os.Stat(filepath.Dir(bin)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("the copy's directory: %v, %v; want mode 0700", fi.Mode(), err)
		}
	})

	t.Run("swapped before the check", func(t *testing.T) {
		swap(t, planted)
		bin, o, err := runGateBinary(t, r, r.tree, cache, srv.URL, noGo)
		if err != nil || !strings.Contains(o, "does not match checksums.txt; downloading it again") || !strings.Contains(o, "downloaded from ") {
			t.Fatalf("gate-binary.sh on a swapped cache = %q, %v, want it refused and downloaded again:\n%s", bin, err, o)
		}
		runs(t, bin)
		if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, r.good) {
			t.Errorf("the cache after a new download is not the release's binary (%v)", err)
		}
	})

	t.Run("swapped all the while", func(t *testing.T) {
		// The two files to swap in are written once; each swap links one
		// of them under a new name and renames that over the cache, a
		// swap every fraction of a millisecond without rewriting 13 MB
		// each time (which kept a core busy for the whole test).
		sources := [2]string{filepath.Join(cache, "planted"), filepath.Join(cache, "good")}
		for i, b := range [][]byte{planted, r.good} {
			if err := os.WriteFile(sources[i], b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tmp := cached + ".swap"
				os.Remove(tmp)
				if os.Link(sources[i%2], tmp) == nil {
					os.Rename(tmp, cached)
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
		defer func() {
			close(stop)
			<-done
		}()
		for range 10 {
			bin, o, err := runGateBinary(t, r, r.tree, cache, srv.URL, noGo)
			if err != nil {
				t.Fatalf("gate-binary.sh = %q, %v:\n%s", bin, err, o)
			}
			// Read while the swaps go on, as the next step would run it.
			if b, err := os.ReadFile(bin); err != nil || !bytes.Equal(b, r.good) {
				t.Fatalf("%s, given while the cache was swapped, is not the release's binary (%v)", bin, err)
			}
		}
	})
}
