package history

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v60/github"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

const check = "npu serve smoke (Qwen3-0.6B, npu)"

// result is a result.json of a run of check on model, with three replies
// whose medians are 100 tok/s and 300 ms.
func result(model, check string) string {
	return `{"schema": "npu-serve-smoke/v1", "verdict": "pass",
  "run": {"model": "` + model + `", "check_name": "` + check + `", "thinking": "off"},
  "replies": [
    {"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": 128, "content": "x"},
    {"n": 2, "first_ms": 300, "last_ms": 1570, "completion_tokens": 128, "content": "x"},
    {"n": 3, "first_ms": 350, "last_ms": 2890, "completion_tokens": 128, "content": "x"}]}`
}

type entry struct {
	name, body string
	link       bool
}

func zipOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.link {
			h.SetMode(os.ModeSymlink | 0o777)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fixture is a fake GitHub with runs of release-gate-matrix.yml: an older
// success on release/1.1, a failure and a success on release/1.2, a
// success on main and this run; the success on release/1.2 holds art.
func fixture(t *testing.T, art fakegithub.Artifact) (*fakegithub.Server, *Source, int64) {
	gh := fakegithub.New("ghs_fake")
	wf := ".github/workflows/release-gate-matrix.yml"
	sha := strings.Repeat("a", 40)
	old := gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "release/1.1", HeadSHA: sha, Event: "push", Conclusion: "success"})
	gh.AddArtifact(fakegithub.Artifact{RunID: old, Name: ArtifactName(check), Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})})
	want := gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "release/1.2", HeadSHA: sha, Event: "push", Conclusion: "success"})
	gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "release/1.2", HeadSHA: sha, Event: "push", Conclusion: "failure"})
	gh.AddRun(fakegithub.WorkflowRun{Workflow: ".github/workflows/other.yml", HeadBranch: "release/1.2", HeadSHA: sha, Event: "push", Conclusion: "success"})
	gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "main", HeadSHA: sha, Event: "push", Conclusion: "success"})
	this := gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "release/1.3", HeadSHA: sha, Event: "push", Conclusion: "success"})
	// Other jobs' artifacts first, so the one wanted is on a later page.
	for _, name := range []string{"npu-serve-smoke-Qwen3-4B-npu", "npu-serve-smoke-Qwen3-8B-npu"} {
		gh.AddArtifact(fakegithub.Artifact{RunID: want, Name: name, Zip: zipOf(t, entry{name: "result.json", body: result("x", "y")})})
	}
	art.RunID = want
	if art.Name == "" {
		art.Name = ArtifactName(check)
	}
	gh.AddArtifact(art)
	srv := httptest.NewServer(gh)
	t.Cleanup(srv.Close)
	client := github.NewClient(nil).WithAuthToken("ghs_fake")
	client.BaseURL, _ = url.Parse(srv.URL + "/")
	return gh, &Source{Client: client, Owner: "acme", Repo: "serve", Workflow: "release-gate-matrix.yml", Pattern: "release/**", ThisRun: this}, want
}

func TestResult(t *testing.T) {
	good := zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)}, entry{name: "serve.log", body: "on the private route\n"},
		entry{name: "reply_1.json", body: `{"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": 128, "content": "x"}`})
	for _, tc := range []struct {
		name    string
		art     fakegithub.Artifact
		pattern string
		max     int64
		want    string // "" found; else the error's kind and words
	}{
		{name: "found", art: fakegithub.Artifact{Zip: good}, pattern: "release/**"},
		{name: "exact branch", art: fakegithub.Artifact{Zip: good}, pattern: "release/1.2"},
		{name: "no run on the pattern", art: fakegithub.Artifact{Zip: good}, pattern: "release/2.*", want: "not found: no successful run of release-gate-matrix.yml on release/2.*"},
		{name: "no such artifact", art: fakegithub.Artifact{Name: "npu-serve-smoke-Qwen3-0.6B-igpu", Zip: good}, pattern: "release/**", want: "not found: run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2) has no artifact npu-serve-smoke-Qwen3-0.6B-npu"},
		{name: "expired", art: fakegithub.Artifact{Zip: good, Expired: true}, pattern: "release/**", want: "not found: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2) has expired"},
		{name: "another model", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-8B", check)})}, pattern: "release/**", want: `bad input: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2) is a run of model "Qwen3-8B", not "Qwen3-0.6B"`},
		{name: "another check", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", "npu serve smoke (Qwen3-0.6B, igpu)")})}, pattern: "release/**", want: `is a run of check "npu serve smoke (Qwen3-0.6B, igpu)", not "npu serve smoke (Qwen3-0.6B, npu)"`},
		{name: "listed too large", art: fakegithub.Artifact{Zip: good, Size: 1 << 30}, pattern: "release/**", want: "bad input: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2) is 1073741824 bytes, more than the 67108864 a baseline may be"},
		{name: "larger than listed", art: fakegithub.Artifact{Zip: good, Size: 100}, pattern: "release/**", max: 200, want: "bad input: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2): the download is more than the 200 bytes a baseline may be"},
		{name: "not a zip", art: fakegithub.Artifact{Zip: []byte("<html>not found</html>")}, pattern: "release/**", want: "bad input: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2): not a zip archive (zip: not a valid zip file)"},
		{name: "zip slip", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)}, entry{name: "../../evil.sh", body: "x"})}, pattern: "release/**", want: `bad input: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2): the entry "../../evil.sh" leaves the archive's directory; refused`},
		{name: "absolute path", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "/etc/x", body: "x"})}, pattern: "release/**", want: `the entry "/etc/x" leaves the archive's directory; refused`},
		{name: "a link", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: "/etc/passwd", link: true})}, pattern: "release/**", want: `the entry "result.json" is not a regular file`},
		{name: "an entry twice", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-8B", check)}, entry{name: "result.json", body: result("Qwen3-0.6B", check)})}, pattern: "release/**", want: `the entry "result.json" is in the archive twice; refused`},
		{name: "an entry twice, spelled apart", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)}, entry{name: "./result.json", body: result("Qwen3-8B", check)})}, pattern: "release/**", want: `the entry "result.json" is in the archive twice; refused`},
		{name: "no result.json", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "serve.log", body: "x"})}, pattern: "release/**", want: "holds no result.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh, src, _ := fixture(t, tc.art)
			src.Pattern, src.MaxZip = tc.pattern, tc.max
			tmp := t.TempDir()
			got, err := func() (*judge.Baseline, error) {
				run, err := src.Latest(context.Background())
				if err != nil {
					return nil, err
				}
				res, err := src.Result(context.Background(), run, ArtifactName(check), tmp, Want{Model: "Qwen3-0.6B", CheckName: check, Thinking: "off"})
				if err != nil {
					return nil, err
				}
				return Baseline(res, run.URL, judge.Limits{RateSource: judge.RateClient})
			}()
			if tc.want == "" {
				want := &judge.Baseline{File: "https://github.com/acme/serve/actions/runs/3", Rate: 100, FirstTokenMS: 300}
				if err != nil || !cmp.Equal(got, want) {
					t.Errorf("baseline = %+v, %v; want %+v", got, err, want)
				}
			} else if kind := kindOf(err); err == nil || !strings.Contains(kind+": "+err.Error(), tc.want) {
				t.Errorf("baseline = %+v, %s: %v; want an error with %q", got, kind, err, tc.want)
			}
			// Nothing but the baseline's own files is written, and only
			// under tmp.
			filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
				if d != nil && !d.IsDir() && !wanted.MatchString(d.Name()) {
					t.Errorf("extracted %s, which a baseline does not need", p)
				}
				return nil
			})
			for _, c := range gh.Calls() {
				if strings.HasPrefix(c.Path, fakegithub.BlobPath) && c.Status != 200 {
					t.Errorf("the download from the storage host answered %d", c.Status)
				}
			}
		})
	}
}

func kindOf(err error) string {
	var nf *NotFound
	var bad *BadInput
	switch {
	case errors.As(err, &nf):
		return "not found"
	case errors.As(err, &bad):
		return "bad input"
	}
	return "error"
}

// The runs are read page by page (Link headers), and the download follows
// the API's redirect without sending the token to the storage host.
func TestCalls(t *testing.T) {
	gh, src, _ := fixture(t, fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})})
	for range 150 {
		gh.AddRun(fakegithub.WorkflowRun{Workflow: ".github/workflows/release-gate-matrix.yml", HeadBranch: "main", Conclusion: "success"})
	}
	// Newer runs on main fill the first page; release/1.2 is on the second.
	run, err := src.Latest(context.Background())
	if err != nil || run.ID != 3 {
		t.Fatalf("Latest() = %+v, %v; want run 3", run, err)
	}
	if _, err := src.Result(context.Background(), run, ArtifactName(check), t.TempDir(), Want{Model: "Qwen3-0.6B", CheckName: check}); err != nil {
		t.Fatal(err)
	}
	want := `GET /repos/acme/serve/actions/workflows/release-gate-matrix.yml/runs?per_page=100&status=success 200
GET /repos/acme/serve/actions/workflows/release-gate-matrix.yml/runs?page=2&per_page=100&status=success 200
GET /repos/acme/serve/actions/runs/3/artifacts?per_page=100 200
GET /repos/acme/serve/actions/artifacts/10/zip 302
GET /_blob/artifacts/10 200
`
	if diff := cmp.Diff(want, gh.Log()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestSpec(t *testing.T) {
	for _, tc := range []struct {
		in, pattern string
		ok, bad     bool
	}{
		{in: "old/result.json"},
		{in: "github:release/1.2", pattern: "release/1.2", ok: true},
		{in: "github:release/**", pattern: "release/**", ok: true},
		{in: "github:", ok: true, bad: true},
		{in: "github:v\x01", ok: true, bad: true},
	} {
		p, ok, err := Spec(tc.in)
		if p != tc.pattern || ok != tc.ok || (err != nil) != tc.bad {
			t.Errorf("Spec(%q) = %q, %v, %v; want %q, %v, error %v", tc.in, p, ok, err, tc.pattern, tc.ok, tc.bad)
		}
	}
	for _, tc := range []struct {
		pattern, branch string
		match           bool
	}{
		{"release/**", "release/1.2", true},
		{"release/**", "release/1.2/rc1", true},
		{"release/*", "release/1.2/rc1", false},
		{"release/*", "release/1.2", true},
		{"v1.?", "v1.2", true},
		{"v1.?", "v1x2", false},
		{"release/1.2", "release/1x2", false},
	} {
		re, _ := patternRE(tc.pattern)
		if got := re.MatchString(tc.branch); got != tc.match {
			t.Errorf("pattern %q matches %q = %v, want %v", tc.pattern, tc.branch, got, tc.match)
		}
	}
}

func TestArtifactName(t *testing.T) {
	for in, want := range map[string]string{
		"npu serve smoke (Qwen3-0.6B, npu)":            "npu-serve-smoke-Qwen3-0.6B-npu",
		"npu serve smoke (Qwen3-0.6B, npu, llama.cpp)": "npu-serve-smoke-Qwen3-0.6B-npu-llama.cpp",
		"a/b:c\"d": "a-b-c-d",
	} {
		if got := ArtifactName(in); got != want {
			t.Errorf("ArtifactName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ArtifactName("x--y"); got != "x-y" {
		t.Errorf("ArtifactName(%q) = %q, want %q", "x--y", got, "x-y")
	}
}

func TestWorkflowFile(t *testing.T) {
	got, err := WorkflowFile("acme/serve/.github/workflows/release-gate-matrix.yml@refs/heads/release/1.3")
	if got != "release-gate-matrix.yml" || err != nil {
		t.Errorf("WorkflowFile() = %q, %v", got, err)
	}
	if _, err := WorkflowFile(""); err == nil {
		t.Errorf("WorkflowFile(\"\") = nil error")
	}
}

// An entry whose header understates its size is refused, and not written.
func TestExtractLyingSize(t *testing.T) {
	big := bytes.Repeat([]byte("x"), maxFile+10)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "result.json", Method: zip.Store, CRC32: crc32.ChecksumIEEE(big), CompressedSize64: uint64(len(big)), UncompressedSize64: 10})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(big)
	zw.Close()
	dir := t.TempDir()
	// archive/zip stops at the header's size; the bound would stop it too.
	if err := Extract(b.Bytes(), dir); err == nil || !strings.Contains(err.Error(), `the entry "result.json"`) {
		t.Errorf("Extract(an entry larger than its header says) = %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "result.json")); err == nil {
		t.Errorf("Extract wrote the entry that was refused")
	}
}

// A run with more artifacts than a page: the one wanted is on page 2.
func TestArtifactsPages(t *testing.T) {
	gh, src, runID := fixture(t, fakegithub.Artifact{Name: "npu-serve-smoke-other-npu", Zip: zipOf(t, entry{name: "result.json", body: result("x", "y")})})
	for i := range 120 {
		gh.AddArtifact(fakegithub.Artifact{RunID: runID, Name: fmt.Sprintf("filler-%d", i), Zip: []byte("PK")})
	}
	gh.AddArtifact(fakegithub.Artifact{RunID: runID, Name: ArtifactName(check), Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})})
	run, err := src.Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Result(context.Background(), run, ArtifactName(check), t.TempDir(), Want{Model: "Qwen3-0.6B", CheckName: check}); err != nil {
		t.Errorf("Result() = %v, want the artifact on page 2 found", err)
	}
	pages := 0
	for _, c := range gh.Calls() {
		if strings.HasSuffix(c.Path, "/artifacts") {
			pages++
		}
	}
	if pages != 2 {
		t.Errorf("the artifacts were read in %d pages, want 2", pages)
	}
}
