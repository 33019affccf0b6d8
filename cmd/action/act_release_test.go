package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

// fakeReleases serves release assets as GitHub's release download URLs do:
// GET /OWNER/REPO/releases/download/TAG/ASSET, 404 for anything else. It
// counts the requests for each path.
type fakeReleases struct {
	mu     sync.Mutex
	assets map[string][]byte
	hits   map[string]int
}

func (f *fakeReleases) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hits[r.URL.Path]++
	b, ok := f.assets[r.URL.Path]
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

func (f *fakeReleases) set(path string, b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assets[path] = b
	f.hits = map[string]int{}
}

func (f *fakeReleases) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.hits {
		n += c
	}
	return n
}

// The action used at a released version, as a runner without Go uses it:
// act in host mode takes `uses: acme/npu-serve-smoke@v9.9.9` from a copy of
// the work tree carrying a checksums.txt for its source, and downloads from
// a fake of the release download server on loopback. The asset it serves is
// a release build of the current source, so the gate that runs is the
// downloaded one (its result.json names v9.9.9, which no other build says).
func TestActionReleaseBinaryUnderAct(t *testing.T) {
	act := findAct(t)
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("releases hold linux/amd64 and linux/arm64 binaries, and this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir := t.TempDir()
	r := newReleased(t, dir)
	tree, branch, bin, good, asset, version, arch := r.tree, r.branch, r.bin, r.good, r.asset, r.version, r.arch

	rel := &fakeReleases{assets: map[string][]byte{}, hits: map[string]int{}}
	dl := httptest.NewServer(rel)
	defer dl.Close()
	assetPath := "/acme/npu-serve-smoke/releases/download/" + version + "/" + asset
	gh := httptest.NewServer(fakegithub.New("ghs_fake"))
	defer gh.Close()

	// The workspace: the workflow alone. The gate runs twice, cold and warm;
	// the serve is the simulated one, run from the asset file itself. What
	// is under test is which binary runs, not the rate: the limits are low
	// enough for a loaded machine.
	ws := filepath.Join(dir, "ws")
	out := filepath.Join(dir, "out")
	step := func(id string) string {
		return `      - id: ` + id + `
        uses: acme/npu-serve-smoke@` + version + `
        with:
          serve: ` + bin + ` fakellm --port {port} --model {model}
          model: sim-0.6B
          replies: 1
          max-tokens: 4
          floor: 1
          first-token-ms: 60000
          comment: never
          out: ` + filepath.Join(out, id) + `
`
	}
	write(t, filepath.Join(ws, ".github/workflows/gate.yml"), `name: gate
on: push
jobs:
  gate:
    runs-on: self-hosted
    steps:
`+step("cold")+step("warm")+`      - run: echo "the gate passed twice"
`)
	gitCommit(t, ws)

	noGo := pathWithoutGo(t)
	goEnv := withGo()
	// run runs the workflow with the action taken from actionTree and a
	// fresh tool cache, which it returns.
	// A lock directory of the test's own, not the machine's
	// /run/lock/npu-hold, whose owner the test does not choose.
	locks := filepath.Join(t.TempDir(), "locks")
	run := func(actionTree string, env []string) (string, string, error) {
		cache := t.TempDir()
		os.RemoveAll(out)
		o, err := runActIn(act, ws, env, "push",
			"-P", "self-hosted=-self-hosted",
			"--action-cache-path", cache,
			"--local-repository", "acme/npu-serve-smoke@"+version+"="+actionTree,
			"-s", "GITHUB_TOKEN=ghs_fake",
			"--env", "GITHUB_API_URL="+gh.URL,
			"--env", "GITHUB_REPOSITORY=acme/serve",
			"--env", "NPU_HOLD_DIR="+filepath.Join(dir, "locks"),
			"--env", "NPU_SERVE_SMOKE_DOWNLOAD_URL="+dl.URL+"/acme/npu-serve-smoke/releases/download/",
			"--env", "NPU_HOLD_DIR="+locks,
		)
		return o, filepath.Join(cache, "tool_cache", "npu-serve-smoke"), err
	}

	t.Run("verified download, then cached, no Go", func(t *testing.T) {
		rel.set(assetPath, good)
		o, cache, err := run(tree, noGo)
		if err != nil {
			t.Fatalf("act: %v\n%s", err, tail(o, 60))
		}
		for _, want := range []string{
			"release " + version + " of acme/npu-serve-smoke@" + version + " for " + arch + ", downloaded from " + dl.URL + assetPath + " and verified",
			"release " + version + " of acme/npu-serve-smoke@" + version + " for " + arch + ", cached and verified",
			"Success - Main echo \"the gate passed twice\"",
		} {
			if strings.Count(o, want) != 1 {
				t.Errorf("act's output has %q %d times, want once:\n%s", want, strings.Count(o, want), tail(o, 60))
			}
		}
		if n := rel.total(); n != 1 {
			t.Errorf("the release server had %d requests, want 1 (the warm run downloads nothing)", n)
		}
		cached, err := os.ReadFile(filepath.Join(cache, "9.9.9", arch, "npu-serve-smoke"))
		if err != nil || !bytes.Equal(cached, good) {
			t.Errorf("the tool cache's binary: %v, same bytes as the release %v", err, bytes.Equal(cached, good))
		}
		if _, err := os.Stat(filepath.Join(cache, "9.9.9", arch+".complete")); err != nil {
			t.Errorf("no .complete marker: %v", err)
		}
		assertNoDownloadLeft(t, cache)
		for _, id := range []string{"cold", "warm"} {
			if tool := resultTool(t, filepath.Join(out, id)); tool != "npu-serve-smoke "+version {
				t.Errorf("%s run: result.json tool = %q, want the release's %q", id, tool, "npu-serve-smoke "+version)
			}
		}
	})

	t.Run("a swapped asset is refused", func(t *testing.T) {
		bad := bytes.Clone(good)
		bad[len(bad)/2] ^= 1
		rel.set(assetPath, bad)
		o, cache, err := run(tree, noGo)
		if err == nil {
			t.Fatalf("act succeeded with a swapped asset:\n%s", tail(o, 40))
		}
		// act drops a failed step's last terminal lines on a loaded
		// machine; the job summary, a file, always reaches its output.
		if !strings.Contains(o, "Summary - ### ❌ npu serve smoke: the gate did not run") {
			t.Errorf("the job summary does not say the gate did not run:\n%s", tail(o, 40))
		}
		if !strings.Contains(o, "The download is refused: nothing was cached or run") || !strings.Contains(o, "checksums.txt at this action's commit says "+sha256File(t, bin)) {
			t.Errorf("no clear refusal:\n%s", tail(o, 40))
		}
		if rel.total() != 1 {
			t.Errorf("the release server had %d requests, want 1", rel.total())
		}
		for _, f := range []string{filepath.Join("9.9.9", arch, "npu-serve-smoke"), filepath.Join("9.9.9", arch+".complete")} {
			if _, err := os.Stat(filepath.Join(cache, f)); err == nil {
				t.Errorf("%s is in the tool cache after a refused download", f)
			}
		}
		assertNoDownloadLeft(t, cache)
		if _, err := os.Stat(filepath.Join(out, "cold")); err == nil {
			t.Errorf("the gate ran after a refused download")
		}
	})

	t.Run("no release of this source and no Go", func(t *testing.T) {
		rel.set(assetPath, good)
		o, _, err := run(branch, noGo)
		if err == nil {
			t.Fatalf("act succeeded with neither a release nor Go:\n%s", tail(o, 40))
		}
		for _, want := range []string{
			"Summary - ### ❌ npu serve smoke: the gate did not run",
			"No release binary for this runner: this source is not release " + version + "'s",
			"Either install Go 1.26 on the runner", "or use a released tag of the action",
		} {
			if !strings.Contains(o, want) {
				t.Errorf("act's output lacks %q:\n%s", want, tail(o, 40))
			}
		}
		if rel.total() != 0 {
			t.Errorf("the release server had %d requests, want none: checksums.txt is not of this source", rel.total())
		}
	})

	t.Run("no release of this source, built with Go", func(t *testing.T) {
		rel.set(assetPath, good)
		o, cache, err := run(branch, goEnv)
		if err != nil {
			t.Fatalf("act: %v\n%s", err, tail(o, 60))
		}
		for _, want := range []string{
			"no release binary (this source is not release " + version + "'s", "building from the action's source at " + version,
			"npu-serve-smoke: built from source into ", "Success - Main echo \"the gate passed twice\"",
		} {
			if !strings.Contains(o, want) {
				t.Errorf("act's output lacks %q:\n%s", want, tail(o, 60))
			}
		}
		if rel.total() != 0 {
			t.Errorf("the release server had %d requests, want none", rel.total())
		}
		if n := strings.Count(o, "npu-serve-smoke: built from source into "); n != 2 {
			t.Errorf("act's output says %d builds, want 2: each run builds (only Go's build cache is kept)", n)
		}
		if _, err := os.Stat(filepath.Join(cache, "9.9.9")); err == nil {
			t.Errorf("a release directory is in the tool cache of a build from source")
		}
		if tool := resultTool(t, filepath.Join(out, "cold")); tool == "npu-serve-smoke "+version {
			t.Errorf("result.json tool = %q: the release binary ran, not the branch's build", tool)
		}
	})
}

// released is a release of the current source for this machine's arch,
// made as cmd/release-sums makes one.
type released struct {
	version, arch, asset string
	bin                  string // the release's gate binary
	good                 []byte // its bytes
	tree                 string // the work tree with the release's checksums.txt
	branch               string // that tree with one source line more
}

// releaseBuilt is the release build of the current source, made once for
// the package: every test of a release takes its bytes (a release build is
// a build of its own, not the tests' -race one, and the slowest thing these
// tests do).
var releaseBuilt struct {
	once sync.Once
	good []byte
	err  error
}

// releaseBuild builds the gate of the tree at root as a release of version
// for this machine's arch, the first time it is called, and returns its
// bytes.
func releaseBuild(root, version string) ([]byte, error) {
	releaseBuilt.once.Do(func() {
		dir, err := os.MkdirTemp("", "npu-serve-smoke-release")
		if err != nil {
			releaseBuilt.err = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "npu-serve-smoke")
		if releaseBuilt.err = release.Build(context.Background(), root, release.Commands[0], version, runtime.GOARCH, bin); releaseBuilt.err != nil {
			return
		}
		releaseBuilt.good, releaseBuilt.err = os.ReadFile(bin)
	})
	return releaseBuilt.good, releaseBuilt.err
}

func newReleased(t testing.TB, dir string) released {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := released{version: "v9.9.9", arch: map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]}
	r.asset = release.Asset("npu-serve-smoke", r.version, runtime.GOARCH)
	r.bin = filepath.Join(dir, r.asset)
	if r.good, err = releaseBuild(root, r.version); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.bin, r.good, 0o755); err != nil {
		t.Fatal(err)
	}
	// The released tree: the work tree plus the checksums.txt the release
	// commit adds.
	r.tree = filepath.Join(dir, "released")
	copyTree(t, root, r.tree)
	writeSums(t, r.tree, r.version, map[string]string{r.asset: sha256File(t, r.bin)})
	// A branch after the release: one source line more, the same checksums.txt.
	r.branch = filepath.Join(dir, "branch")
	copyTree(t, r.tree, r.branch)
	mainGo := filepath.Join(r.branch, "cmd/action/main.go")
	b, err := os.ReadFile(mainGo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, mainGo, string(b)+"\n// A change after the release.\n")
	return r
}

func writeSums(t testing.TB, tree, version string, files map[string]string) {
	t.Helper()
	src, err := release.SourceHash(tree)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	s := release.Sums{Version: version, Go: runtime.Version(), Source: src, Files: files}
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tree, "checksums.txt"), b.String())
	gitCommit(t, tree)
}

func sha256File(t testing.TB, name string) string {
	t.Helper()
	s, err := release.FileSHA256(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gitCommit commits everything in dir, a repository or not yet one.
func gitCommit(t testing.TB, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-qm", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// pathWithoutGo is the environment with every PATH directory that holds a
// go command left out.
func pathWithoutGo(t testing.TB) []string {
	t.Helper()
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "go")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "bash")); err == nil {
				t.Skipf("go and bash share %s: no PATH without go can run the action", d)
			}
			continue
		}
		keep = append(keep, d)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+strings.Join(keep, string(filepath.ListSeparator)))
	cmd := exec.Command("bash", "-c", "! command -v go")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go is still on PATH=%s: %s", strings.Join(keep, ":"), out)
	}
	return env
}

func assertNoDownloadLeft(t *testing.T, cache string) {
	t.Helper()
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".download.") {
			t.Errorf("a partial download is left in the tool cache: %s", p)
		}
		return nil
	})
}

func resultTool(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Errorf("%v", err)
		return ""
	}
	var r struct{ Run struct{ Tool string } }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Errorf("result.json: %v", err)
	}
	return r.Run.Tool
}
