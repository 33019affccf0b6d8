package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fleet"
)

// BenchmarkReport is the merge job's own time, from the matrix's last job
// done (its artifacts downloaded) to the merged check run and sticky
// comment posted, against the fake GitHub: 6 jobs (2 devices × 3 models,
// one on the slow route) read, re-judged and posted, on a pull request. It
// reports the API calls and the comment's size. With a baseline, each job's
// artifact of the last release is looked up and downloaded too.
func BenchmarkReport(b *testing.B) {
	needPrograms(b)
	dir := b.TempDir()
	quiet := func(string) string { return "" }
	var dirs []string
	matrix := `{"device": ["npu", "igpu"], "model": ["Qwen3-0.6B", "Qwen3-4B", "Qwen3-8B"]}`
	jobs, err := fleet.ParseMatrix(matrix)
	if err != nil {
		b.Fatal(err)
	}
	for i, j := range jobs {
		out := filepath.Join(dir, "runs", j.Artifact("npu serve smoke"))
		route := "fast"
		if i == 4 {
			route = "slow"
		}
		code := run(context.Background(), []string{"run",
			"--serve", fmt.Sprintf("fakellm --port {port} --model {model} --instant --first-token-ms 0 --rate %d --route %s", 70+5*i, route),
			"--model", j.Model(), "--rate-source", "server", "--replies", "5", "--max-tokens", "16", "--hold", "none",
			"--check-name", j.CheckName("npu serve smoke"), "--out", out}, quiet, io.Discard, io.Discard)
		if code != exitPass && route == "fast" || code != exitFail && route == "slow" {
			b.Fatalf("the gate of %v exited %d", j, code)
		}
		dirs = append(dirs, out)
	}
	event := filepath.Join(dir, "event.json")
	os.WriteFile(event, []byte(`{"number": 7, "pull_request": {"number": 7, "head": {"sha": "`+strings.Repeat("1", 40)+`", "repo": {"full_name": "acme/serve"}}, "base": {"repo": {"full_name": "acme/serve"}}}}`), 0o644)

	for _, baseline := range []bool{false, true} {
		b.Run(fmt.Sprintf("baseline=%v", baseline), func(b *testing.B) {
			gh := fakegithub.New("ghs_fake")
			srv := httptest.NewServer(gh)
			defer srv.Close()
			env := map[string]string{
				"GITHUB_ACTIONS": "true", "GITHUB_API_URL": srv.URL, "GITHUB_REPOSITORY": "acme/serve",
				"GITHUB_SHA": strings.Repeat("2", 40), "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": event,
				"GITHUB_RUN_ID": "1000", "GITHUB_TOKEN": "ghs_fake", "RUNNER_TEMP": b.TempDir(),
				"GITHUB_WORKFLOW_REF": "acme/serve/.github/workflows/release-gate-matrix.yml@refs/pull/7/merge",
			}
			args := append([]string{"report", "--matrix", matrix, "--rate-source", "server"}, dirs...)
			if baseline {
				id := gh.AddRun(fakegithub.WorkflowRun{Workflow: ".github/workflows/release-gate-matrix.yml", HeadBranch: "release/1.2", HeadSHA: strings.Repeat("3", 40), Conclusion: "success"})
				for _, d := range dirs {
					gh.AddArtifact(fakegithub.Artifact{RunID: id, Name: filepath.Base(d), Zip: zipOf(b, d)})
				}
				args = append(args[:1], append([]string{"--baseline", "github:release/**", "--max-regression", "50"}, args[1:]...)...)
			}
			before := 0
			for b.Loop() {
				before = len(gh.Calls())
				if code := run(context.Background(), args, func(k string) string { return env[k] }, io.Discard, io.Discard); code != exitFail {
					b.Fatalf("report exited %d, want 1 (one job on the slow route)", code)
				}
			}
			cs := gh.Comments(7)
			if len(cs) != 1 {
				b.Fatalf("%d comments, want 1", len(cs))
			}
			b.ReportMetric(float64(len(gh.Calls())-before), "requests/op")
			b.ReportMetric(float64(len(cs[0].Body)), "comment-bytes")
		})
	}
}

func zipOf(b *testing.B, dir string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		w, _ := zw.Create(e.Name())
		w.Write(data)
	}
	zw.Close()
	return buf.Bytes()
}
