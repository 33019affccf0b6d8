package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
		out := filepath.Join(b.TempDir(), "output")
		cmd := exec.Command("bash", filepath.Join(tree, "gate-binary.sh"))
		cmd.Env = append(env,
			"ACTION_PATH="+tree, "ACTION_REPOSITORY=acme/npu-serve-smoke", "ACTION_REF="+r.version,
			"RUNNER_OS=Linux", "RUNNER_ARCH="+map[string]string{"x64": "X64", "arm64": "ARM64"}[r.arch],
			"RUNNER_TOOL_CACHE="+cache, "RUNNER_TEMP="+b.TempDir(), "GITHUB_OUTPUT="+out,
			"NPU_SERVE_SMOKE_DOWNLOAD_URL="+srv.URL+"/acme/npu-serve-smoke/releases/download")
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("gate-binary.sh: %v\n%s", err, o)
		}
		o, err := os.ReadFile(out)
		if err != nil {
			b.Fatal(err)
		}
		bin := strings.TrimSpace(strings.TrimPrefix(string(o), "bin="))
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
		step(b, r.branch, b.TempDir(), os.Environ())
		for b.Loop() {
			step(b, r.branch, b.TempDir(), os.Environ())
		}
	})
	b.Run("source-cold", func(b *testing.B) {
		for b.Loop() {
			step(b, r.branch, b.TempDir(), append(os.Environ(), "GOCACHE="+b.TempDir()))
		}
	})
}
