package history

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v60/github"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
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
	// stored: the entry is stored, not deflated (a deflating writer per
	// entry costs far more than the entry when there are thousands).
	stored bool
}

func zipOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	// The fastest deflate: tests' entries are a letter repeated or a few
	// bytes, and the default level spends seconds on 36 MiB of them.
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestSpeed)
	})
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.stored {
			h.Method = zip.Store
		}
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
		{name: "another model", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-8B", check)})}, pattern: "release/**", want: `unusable: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2) is a run of model "Qwen3-8B", not "Qwen3-0.6B"`},
		{name: "another check", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", "npu serve smoke (Qwen3-0.6B, igpu)")})}, pattern: "release/**", want: `is a run of check "npu serve smoke (Qwen3-0.6B, igpu)", not "npu serve smoke (Qwen3-0.6B, npu)"`},
		{name: "listed too large", art: fakegithub.Artifact{Zip: good, Size: 1 << 30}, pattern: "release/**", want: "unusable: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2) is 1073741824 bytes, more than the 67108864 a baseline may be"},
		{name: "larger than listed", art: fakegithub.Artifact{Zip: good, Size: 100}, pattern: "release/**", max: 200, want: "unusable: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2): the download is more than the 200 bytes a baseline may be"},
		{name: "not a zip", art: fakegithub.Artifact{Zip: []byte("<html>not found</html>")}, pattern: "release/**", want: "unusable: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2): not a zip archive (zip: not a valid zip file)"},
		{name: "zip slip", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)}, entry{name: "../../evil.sh", body: "x"})}, pattern: "release/**", want: `unusable: artifact npu-serve-smoke-Qwen3-0.6B-npu of run 3 (https://github.com/acme/serve/actions/runs/3 on release/1.2): the entry "../../evil.sh" leaves the archive's directory; refused`},
		{name: "absolute path", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "/etc/x", body: "x"})}, pattern: "release/**", want: `the entry "/etc/x" leaves the archive's directory; refused`},
		{name: "a link", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: "/etc/passwd", link: true})}, pattern: "release/**", want: `the entry "result.json" is not a regular file`},
		{name: "an entry twice", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-8B", check)}, entry{name: "result.json", body: result("Qwen3-0.6B", check)})}, pattern: "release/**", want: `the entry "result.json" is in the archive twice; refused`},
		{name: "an entry twice, spelled apart", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)}, entry{name: "./result.json", body: result("Qwen3-8B", check)})}, pattern: "release/**", want: `the entry "result.json" is in the archive twice; refused`},
		{name: "a first token below 0", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: strings.NewReplacer(`"first_ms": 250`, `"first_ms": -5`, `"first_ms": 300`, `"first_ms": -5`).Replace(result("Qwen3-0.6B", check))})}, pattern: "release/**",
			want: "replies[0].first_ms is -5, below 0; replies[1].first_ms is -5, below 0; it is not a file the gate wrote, refused"},
		{name: "no result.json", art: fakegithub.Artifact{Zip: zipOf(t, entry{name: "serve.log", body: "x"})}, pattern: "release/**", want: "holds no result.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh, src, _ := fixture(t, tc.art)
			src.Pattern, src.MaxZip = tc.pattern, tc.max
			tmp := wintest.TempDir(t)
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
				want := &judge.Baseline{File: "https://github.com/acme/serve/actions/runs/3", Rate: 100, FirstTokenMS: 300,
					Replies: 3, RateLo: 50, FirstTokenHiMS: 350, Coverage: 0.75}
				if err != nil || !cmp.Equal(got, want) {
					t.Errorf("baseline = %+v, %v; want %+v", got, err, want)
				}
			} else if kind := kindOf(err); err == nil || !strings.Contains(kind+": "+err.Error(), tc.want) {
				t.Errorf("baseline = %+v, %s: %v; want an error with %q", got, kind, err, tc.want)
			}
			// Nothing but the baseline's own files is written, and only
			// under tmp.
			filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
				if d != nil && !d.IsDir() && !wanted().MatchString(d.Name()) {
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
	var un *Unusable
	switch {
	case errors.As(err, &nf):
		return "not found"
	case errors.As(err, &bad):
		return "bad input"
	case errors.As(err, &un):
		return "unusable"
	}
	return "error"
}

// The runs are read page by page (Link headers), one event at a time, and
// the download follows the API's redirect without sending the token to the
// storage host.
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
	if _, err := src.Result(context.Background(), run, ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}); err != nil {
		t.Fatal(err)
	}
	want := `GET /repos/acme/serve/actions/workflows/release-gate-matrix.yml/runs?event=push&per_page=100&status=success 200
GET /repos/acme/serve/actions/workflows/release-gate-matrix.yml/runs?event=push&page=2&per_page=100&status=success 200
GET /repos/acme/serve/actions/workflows/release-gate-matrix.yml/runs?event=workflow_dispatch&per_page=100&status=success 200
GET /repos/acme/serve/actions/workflows/release-gate-matrix.yml/runs?event=release&per_page=100&status=success 200
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
	dir := wintest.TempDir(t)
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
	if _, err := src.Result(context.Background(), run, ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}); err != nil {
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

// Only runs the repository's own code made can be a baseline: a fork's
// pull_request run, listed under a branch name the fork chose, is never
// one, nor a run of another event, even when the API does not filter.
func TestOwnRunsOnly(t *testing.T) {
	wf := ".github/workflows/release-gate-matrix.yml"
	for _, tc := range []struct {
		name        string
		run         fakegithub.WorkflowRun
		ignoreEvent bool // the API drops event=: the client's own check decides
		taken       bool
	}{
		{name: "a fork's pull_request", run: fakegithub.WorkflowRun{Event: "pull_request", HeadRepo: "mallory/serve"}},
		{name: "a fork's pull_request, unfiltered", run: fakegithub.WorkflowRun{Event: "pull_request", HeadRepo: "mallory/serve"}, ignoreEvent: true},
		{name: "a pull_request of the repository, unfiltered", run: fakegithub.WorkflowRun{Event: "pull_request"}, ignoreEvent: true},
		{name: "a workflow_run, unfiltered", run: fakegithub.WorkflowRun{Event: "workflow_run"}, ignoreEvent: true},
		{name: "a push from another repository", run: fakegithub.WorkflowRun{Event: "push", HeadRepo: "mallory/serve"}},
		{name: "a push", run: fakegithub.WorkflowRun{Event: "push"}, taken: true},
		{name: "a workflow_dispatch", run: fakegithub.WorkflowRun{Event: "workflow_dispatch"}, taken: true},
		{name: "a release", run: fakegithub.WorkflowRun{Event: "release"}, taken: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh, src, old := fixture(t, fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})})
			if tc.ignoreEvent {
				gh.IgnoreEvent()
			}
			r := tc.run
			r.Workflow, r.HeadBranch, r.HeadSHA, r.Conclusion = wf, "release/1.9", strings.Repeat("b", 40), "success"
			id := gh.AddRun(r)
			want := old
			if tc.taken {
				want = id
			}
			run, err := src.Latest(context.Background())
			if err != nil || run.ID != want {
				t.Errorf("Latest() = run %d, %v; want run %d", run.ID, err, want)
			}
		})
	}
}

// Extraction is bounded as a whole: bytes written, entries, and only the
// files a baseline reads (no warm-ups).
func TestExtractBounds(t *testing.T) {
	reply := func(n, size int) entry {
		return entry{name: fmt.Sprintf("reply_%d.json", n), body: fmt.Sprintf(`{"n": %d, "content": "%s"}`, n, strings.Repeat("a", size))}
	}
	res := entry{name: "result.json", body: result("Qwen3-0.6B", check)}
	many := []entry{res}
	for i := range 10_001 {
		many = append(many, entry{name: fmt.Sprintf("logs/%d.txt", i), body: "x", stored: true})
	}
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string // "": extracted
		files   []string
	}{
		{name: "no warm-ups", entries: []entry{res, reply(1, 10), {name: "warmup_1.json", body: `{"n": 1, "warmup": true}`}}, files: []string{"reply_1.json", "result.json"}},
		{name: "replies past the total", entries: []entry{res, reply(1, 12<<20), reply(2, 12<<20), reply(3, 12<<20)}, want: "more than the 33554432 bytes"},
		{name: "too many entries", entries: many, want: "more than 10000 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := wintest.TempDir(t)
			err := Extract(zipOf(t, tc.entries...), dir)
			var files []string
			var written int64
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if d != nil && !d.IsDir() {
					fi, _ := d.Info()
					written += fi.Size()
					files = append(files, d.Name())
				}
				return nil
			})
			if tc.want == "" {
				if err != nil || !cmp.Equal(files, tc.files) {
					t.Errorf("Extract() wrote %q, %v; want %q", files, err, tc.files)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Extract() = %v, want an error with %q", err, tc.want)
			}
			if written > 32<<20 {
				t.Errorf("Extract() wrote %d bytes before it refused, more than 32 MiB", written)
			}
		})
	}
}

// storage is a storage host that records the Authorization header of every
// request and serves zip.
func storage(t *testing.T, zip []byte) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write(zip)
	}))
	t.Cleanup(srv.Close)
	return srv, &auth
}

// The download's redirect is followed without the token, and only a 302 or
// 307: any other is refused, whatever host it names.
func TestDownloadRedirects(t *testing.T) {
	good := zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})
	for _, tc := range []struct {
		status int
		want   string // "": downloaded
	}{
		{status: http.StatusFound},
		{status: http.StatusTemporaryRedirect},
		{status: http.StatusMovedPermanently, want: "answered 301 Moved Permanently"},
		{status: http.StatusPermanentRedirect, want: "answered 308 Permanent Redirect"},
		{status: http.StatusSeeOther, want: "answered 303 See Other"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			gh, src, _ := fixture(t, fakegithub.Artifact{Zip: good})
			store, auth := storage(t, good)
			gh.Fail(fakegithub.Fault{Method: http.MethodGet, Path: regexp.MustCompile(`/actions/artifacts/\d+/zip$`), Status: tc.status,
				Header: map[string]string{"Location": store.URL + "/blob?sig=1"}})
			run, err := src.Latest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, err = src.Result(context.Background(), run, ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check})
			for _, a := range *auth {
				if a != "" {
					t.Errorf("the storage host received Authorization %q", a)
				}
			}
			if tc.want == "" {
				if err != nil || len(*auth) != 1 {
					t.Errorf("Result() after a %d = %v, with %d downloads; want the artifact, downloaded once", tc.status, err, len(*auth))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Result() after a %d = %v, want an error with %q", tc.status, err, tc.want)
			}
			if len(*auth) != 0 {
				t.Errorf("the refused redirect was followed %d times", len(*auth))
			}
		})
	}
}

// runsAPI answers the runs list as a broken or hostile API does, and stops
// answering (500) after 200 requests, so that a client without a bound
// still ends.
func runsAPI(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*Source, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 200 {
			http.Error(w, `{"message": "enough"}`, http.StatusInternalServerError)
			return
		}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	client := github.NewClient(nil).WithAuthToken("ghs_fake")
	client.BaseURL, _ = url.Parse(srv.URL + "/")
	return &Source{Client: client, Owner: "acme", Repo: "serve", Workflow: "release-gate-matrix.yml", Pattern: "release/**"}, &n
}

// The runs are read within bounds: a page bound, a repeated next link, and
// one deadline for the whole fetch; each is a notice, not a failure.
func TestRunsBounded(t *testing.T) {
	page := func(w http.ResponseWriter, r *http.Request, next int, runs string) {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(next))
		u.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, u.String()))
		fmt.Fprintf(w, `{"total_count": 1000000, "workflow_runs": [%s]}`, runs)
	}
	other := func(id int) string {
		return fmt.Sprintf(`{"id": %d, "head_branch": "main", "event": "push", "status": "completed", "conclusion": "success", "head_repository": {"full_name": "acme/serve"}}`, id)
	}
	pageOf := func(r *http.Request) int {
		p, _ := strconv.Atoi(r.URL.Query().Get("page"))
		return max(p, 1)
	}
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter, r *http.Request)
		timeout time.Duration
		want    string
		most    int64 // requests
	}{
		{name: "empty pages with next", answer: func(w http.ResponseWriter, r *http.Request) { page(w, r, pageOf(r)+1, "") }, want: "an empty page", most: 3},
		{name: "the same page again", answer: func(w http.ResponseWriter, r *http.Request) { page(w, r, 2, other(pageOf(r))) }, want: "names page 2 again", most: 3 * 2},
		{name: "pages without end", answer: func(w http.ResponseWriter, r *http.Request) {
			var runs []string
			for i := range 100 {
				runs = append(runs, other(pageOf(r)*100+i))
			}
			page(w, r, pageOf(r)+1, strings.Join(runs, ","))
		}, want: "no run in the newest", most: 3 * 5},
		{name: "an API that never answers", answer: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, timeout: 100 * time.Millisecond, want: "took longer than 100ms", most: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, n := runsAPI(t, tc.answer)
			src.Timeout = tc.timeout
			_, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{CheckName: check}, judge.Limits{})
			if kind := kindOf(err); kind != "not found" || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Find() = %s: %v; want a notice with %q", kind, err, tc.want)
			}
			if got := n.Load(); got > tc.most {
				t.Errorf("Find() asked %d times, want at most %d", got, tc.most)
			}
		})
	}
}

// A candidate that cannot serve is skipped, named with why, for the next
// older one, among the newest Candidates; none that can is a notice.
func TestFind(t *testing.T) {
	wf := ".github/workflows/release-gate-matrix.yml"
	good := zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})
	bad := map[string]fakegithub.Artifact{
		"not a zip":         {Zip: []byte("<html>not found</html>")},
		"another model":     {Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-8B", check)})},
		"too large":         {Zip: good, Size: 1 << 30},
		"no result.json":    {Zip: zipOf(t, entry{name: "serve.log", body: "x"})},
		"unsafe":            {Zip: zipOf(t, entry{name: "../result.json", body: result("Qwen3-0.6B", check)})},
		"a run that failed": {Zip: zipOf(t, entry{name: "result.json", body: strings.Replace(result("Qwen3-0.6B", check), `"verdict": "pass"`, `"verdict": "fail"`, 1)})},
		"a recording":       {Zip: zipOf(t, entry{name: "result.json", body: strings.Replace(result("Qwen3-0.6B", check), `"run": {`, `"run": {"kind": "reference", `, 1)})},
		"no figures":        {Zip: zipOf(t, entry{name: "result.json", body: `{"schema": "npu-serve-smoke/v1", "verdict": "pass", "run": {"model": "Qwen3-0.6B", "check_name": "` + check + `"}}`})},
	}
	for why, art := range bad {
		t.Run(why, func(t *testing.T) {
			gh, src, old := fixture(t, fakegithub.Artifact{Zip: good})
			id := gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "release/1.9", Conclusion: "success"})
			art.RunID, art.Name = id, ArtifactName(check)
			gh.AddArtifact(art)
			f, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}, judge.Limits{RateSource: judge.RateClient})
			if err != nil || f.Run.ID != old || f.Baseline == nil || f.Baseline.Rate != 100 {
				t.Fatalf("Find() = %+v, %v; want run %d's baseline of 100 tok/s", f, err, old)
			}
			if want := fmt.Sprintf("run %d (https://github.com/acme/serve/actions/runs/%d on release/1.9)", id, id); len(f.Skipped) != 1 || !strings.Contains(f.Skipped[0], want) {
				t.Errorf("Find() skipped %q, want one naming %s", f.Skipped, want)
			}
			if why == "a recording" && (len(f.Skipped) != 1 || !strings.Contains(f.Skipped[0], `it is a recording (run.kind "reference")`)) {
				t.Errorf("Find() skipped %q, want the recording skipped as one", f.Skipped)
			}
		})
	}
	t.Run("more bad candidates than tried", func(t *testing.T) {
		gh, src, _ := fixture(t, fakegithub.Artifact{Zip: good})
		for range Candidates {
			id := gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "release/1.9", Conclusion: "success"})
			gh.AddArtifact(fakegithub.Artifact{RunID: id, Name: ArtifactName(check), Zip: bad["another model"].Zip})
		}
		f, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}, judge.Limits{RateSource: judge.RateClient})
		if kind := kindOf(err); kind != "not found" || !strings.Contains(err.Error(), "none of the 5 newest successful runs") || len(f.Skipped) != Candidates {
			t.Errorf("Find() = %s: %v, skipped %d; want a notice after %d skipped", kind, err, len(f.Skipped), Candidates)
		}
		downloads := 0
		for _, c := range gh.Calls() {
			if strings.HasPrefix(c.Path, fakegithub.BlobPath) {
				downloads++
			}
		}
		if downloads != Candidates {
			t.Errorf("Find() downloaded %d artifacts, want %d", downloads, Candidates)
		}
	})
	t.Run("a token that may not read", func(t *testing.T) {
		gh, src, _ := fixture(t, fakegithub.Artifact{Zip: good})
		gh.Fail(fakegithub.Fault{Method: http.MethodGet, Path: regexp.MustCompile(`/runs$`), Status: http.StatusForbidden})
		_, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}, judge.Limits{RateSource: judge.RateClient})
		if kind := kindOf(err); kind != "bad input" || !strings.Contains(err.Error(), "actions: read") {
			t.Errorf("Find() with a 403 = %s: %v; want bad input naming the permission", kind, err)
		}
	})
}

// A run's artifacts list that repeats a page, or answers an empty one with
// a next link, is not read further: that candidate is skipped.
func TestArtifactsBounded(t *testing.T) {
	for name, body := range map[string]string{
		"empty page with next": `{"total_count": 5, "artifacts": []}`,
		"the same page again":  `{"total_count": 5, "artifacts": [{"id": 99, "name": "other"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			gh, src, _ := fixture(t, fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})})
			gh.Fail(fakegithub.Fault{Method: http.MethodGet, Path: regexp.MustCompile(`/runs/\d+/artifacts$`), Status: http.StatusOK, Body: body,
				Header: map[string]string{"Link": `<http://example.invalid/repos/acme/serve/actions/runs/3/artifacts?page=1>; rel="next"`}})
			f, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}, judge.Limits{RateSource: judge.RateClient})
			if kind := kindOf(err); kind != "not found" || len(f.Skipped) == 0 || !strings.Contains(f.Skipped[0], "the list is not read further") {
				t.Errorf("Find() = %s: %v, skipped %q; want the candidate skipped for its list", kind, err, f.Skipped)
			}
			lists := 0
			for _, c := range gh.Calls() {
				if strings.HasSuffix(c.Path, "/artifacts") {
					lists++
				}
			}
			if lists > 2*Candidates {
				t.Errorf("Find() read %d pages of artifacts, want at most 2 per candidate", lists)
			}
		})
	}
}

// A newest candidate whose download fails (the storage host refuses the
// signed URL, answers 500, cuts the connection or the body; the API fails
// the redirect) is skipped for the next older one: a failure that would
// recur on every later run is never the run's bad input, or one lost blob
// would stop every release until its run aged out.
func TestFindBrokenDownload(t *testing.T) {
	wf := ".github/workflows/release-gate-matrix.yml"
	good := zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})
	for _, tc := range []struct {
		name  string
		store http.HandlerFunc // "": the API itself fails the redirect
		api   int
	}{
		{name: "storage refuses the signature", store: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "AuthorizationFailure", http.StatusForbidden)
		}},
		{name: "storage answers 500", store: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "InternalError", http.StatusInternalServerError)
		}},
		{name: "storage cuts the connection", store: func(w http.ResponseWriter, r *http.Request) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		}},
		{name: "storage cuts the body", store: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(good)))
			w.Write(good[:len(good)/2])
		}},
		{name: "the API fails the redirect", api: http.StatusInternalServerError},
		{name: "the API answers 200 with no redirect", api: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh, src, old := fixture(t, fakegithub.Artifact{Zip: good})
			id := gh.AddRun(fakegithub.WorkflowRun{Workflow: wf, HeadBranch: "release/1.9", Conclusion: "success"})
			newest := gh.AddArtifact(fakegithub.Artifact{RunID: id, Name: ArtifactName(check), Zip: good})
			fault := fakegithub.Fault{Method: http.MethodGet, Path: regexp.MustCompile(fmt.Sprintf(`/actions/artifacts/%d/zip$`, newest)), Status: tc.api}
			if tc.store != nil {
				store := httptest.NewServer(tc.store)
				t.Cleanup(store.Close)
				fault.Status, fault.Header = http.StatusFound, map[string]string{"Location": store.URL + "/blob?sig=1"}
			}
			gh.Fail(fault)
			f, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}, judge.Limits{RateSource: judge.RateClient})
			if err != nil || f.Run.ID != old || f.Baseline == nil || f.Baseline.Rate != 100 {
				t.Fatalf("Find() = %+v, %s: %v; want run %d's baseline of 100 tok/s", f, kindOf(err), err, old)
			}
			if want := fmt.Sprintf("run %d (https://github.com/acme/serve/actions/runs/%d on release/1.9)", id, id); len(f.Skipped) != 1 || !strings.Contains(f.Skipped[0], want) {
				t.Errorf("Find() skipped %q, want one naming %s", f.Skipped, want)
			}
		})
	}
}

// A runs list that GitHub fails (a 5xx, an answer that is not JSON) ends
// the look with a notice, as its bounds do: the run goes on without the
// baseline, and is not bad input.
func TestRunsBroken(t *testing.T) {
	for name, answer := range map[string]http.HandlerFunc{
		"500": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"message": "oops"}`, http.StatusInternalServerError)
		},
		"not JSON": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") },
		"a 404 stays": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"message": "Not Found"}`, http.StatusNotFound)
		},
	} {
		t.Run(name, func(t *testing.T) {
			src, _ := runsAPI(t, answer)
			_, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{CheckName: check}, judge.Limits{})
			want := "cannot be read"
			if name == "a 404 stays" {
				want = "GitHub knows no workflow of that file name there yet, or the token may not see the repository's runs: a token other than the job's GITHUB_TOKEN needs actions: read on it"
			}
			if kind := kindOf(err); kind != "not found" || !strings.Contains(err.Error(), want) {
				t.Errorf("Find() = %s: %v; want a notice with %q", kind, err, want)
			}
		})
	}
}

// An API answer is read to at most MaxAnswer bytes, whatever it sends: a
// runs page of 100 MiB (or a gzip bomb that inflates to it) is cut, and the
// look ends with a notice, not with the answer held whole in memory.
func TestAnswersBounded(t *testing.T) {
	const huge = 100 << 20
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.WriteString(w, `{"total_count": 1, "workflow_runs": [`)
		written.Add(int64(n))
		pad := []byte(strings.Repeat(" ", 64<<10))
		for written.Load() < huge {
			n, err := w.Write(pad)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		n, _ = io.WriteString(w, `]}`)
		written.Add(int64(n))
	}))
	t.Cleanup(srv.Close)
	client := github.NewClient(&http.Client{Transport: APITransport(nil)}).WithAuthToken("ghs_fake")
	client.BaseURL, _ = url.Parse(srv.URL + "/")
	src := &Source{Client: client, Owner: "acme", Repo: "serve", Workflow: "release-gate-matrix.yml", Pattern: "release/**"}
	_, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{CheckName: check}, judge.Limits{})
	if kind := kindOf(err); kind != "not found" || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("Find() = %s: %v; want a notice that the answer was too long", kind, err)
	}
	srv.Close() // waits for the handler: written is final
	if got := written.Load(); got >= huge {
		t.Errorf("the client read the whole %d-byte answer; want it cut near %d", got, MaxAnswer)
	}
}

// A pattern that can match no branch or tag GitHub lists (a full ref name,
// a character class or a negation as workflow filters write them, a
// character git forbids in names) is bad input that says what to write,
// not a notice on every run that no run matched.
func TestSpecTypos(t *testing.T) {
	for in, want := range map[string]string{
		"github:refs/heads/release/1.2": "pass github:release/1.2",
		"github:refs/tags/v1.*":         "pass github:v1.*",
		"github:release/v[0-9]*":        "character classes",
		"github:!release/old":           "negation",
		"github:release 1.2":            "' '",
		"github:release/1.2~1":          "'~'",
		"github:release:1.2":            "':'",
		"github:release/":               "pass github:release/** for every branch or tag under release/",
		"github:release/../main":        `".."`,
		"github:release//1.2":           `"//"`,
	} {
		_, ok, err := Spec(in)
		if !ok || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Spec(%q) = %v, %v; want an error with %q", in, ok, err, want)
		}
	}
	for _, in := range []string{"github:release/1.2+cuda", "github:v1.2.0-rc.1", "github:user/x_y"} {
		if _, _, err := Spec(in); err != nil {
			t.Errorf("Spec(%q) = %v; want it taken", in, err)
		}
	}
}

// An API answer that redirects a list (runs, artifacts) to another host is
// not followed: the client adds the token to every request it sends, so
// following it would hand the token to that host. A redirect on the API's
// own host (GitHub's 301 for a renamed repository) still is.
func TestAPIRedirects(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, `{"total_count": 0, "workflow_runs": []}`)
	}))
	t.Cleanup(evil.Close)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			auth = nil
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/moved/") {
					fmt.Fprint(w, `{"total_count": 0, "workflow_runs": []}`)
					return
				}
				if r.URL.Query().Get("event") == "push" {
					http.Redirect(w, r, "/moved"+r.URL.RequestURI(), status)
					return
				}
				http.Redirect(w, r, evil.URL+r.URL.RequestURI(), status)
			}))
			t.Cleanup(srv.Close)
			client := github.NewClient(&http.Client{Transport: APITransport(nil)}).WithAuthToken("ghs_fake")
			client.BaseURL, _ = url.Parse(srv.URL + "/")
			src := &Source{Client: client, Owner: "acme", Repo: "serve", Workflow: "release-gate-matrix.yml", Pattern: "release/**"}
			_, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{CheckName: check}, judge.Limits{})
			mu.Lock()
			defer mu.Unlock()
			if len(auth) != 0 {
				t.Errorf("the other host was asked %d times, with Authorization %q", len(auth), auth)
			}
			if kind := kindOf(err); kind != "not found" || !strings.Contains(err.Error(), "redirected to another host") {
				t.Errorf("Find() = %s: %v; want a notice that the redirect was not followed", kind, err)
			}
		})
	}
}

// JSON objects are what inflates most when the replies are read back (an
// empty arrival, 3 bytes, is a 16-byte struct in a growing slice: 2 replies
// of 16 MiB of them, a 33 KB zip, took 510 MB resident): the objects in the
// files a baseline reads are bounded too, far above a real run's (one
// arrival a token).
func TestExtractObjects(t *testing.T) {
	objects := func(n, count int) entry {
		return entry{name: fmt.Sprintf("reply_%d.json", n), body: fmt.Sprintf(`{"n": %d, "first_ms": 1, "last_ms": 2, "completion_tokens": 2, "arrivals": [{}%s]}`, n, strings.Repeat(",{}", count-1))}
	}
	res := entry{name: "result.json", body: result("Qwen3-0.6B", check)}
	dir := wintest.TempDir(t)
	if err := Extract(zipOf(t, res, objects(1, maxObjects/2), objects(2, maxObjects/2)), dir); err == nil || !strings.Contains(err.Error(), "JSON objects") {
		t.Errorf("Extract(2 replies of %d arrivals) = %v, want it refused for its objects", maxObjects/2, err)
	}
	// A run of 100 replies of 4096 tokens, each token its own arrival.
	var real []entry
	for n := 1; n <= 100; n++ {
		real = append(real, objects(n, 4096))
	}
	if err := Extract(zipOf(t, append(real, res)...), wintest.TempDir(t)); err != nil {
		t.Errorf("Extract(100 replies of 4096 arrivals) = %v, want it extracted", err)
	}
}

// The one deadline covers the download: a storage host that sends the
// headers and then nothing ends the look with a notice.
func TestDownloadDeadline(t *testing.T) {
	good := zipOf(t, entry{name: "result.json", body: result("Qwen3-0.6B", check)})
	gh, src, _ := fixture(t, fakegithub.Artifact{Zip: good})
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(good)))
		w.Write(good[:10])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(store.Close)
	gh.Fail(fakegithub.Fault{Method: http.MethodGet, Path: regexp.MustCompile(`/actions/artifacts/\d+/zip$`), Status: http.StatusFound,
		Header: map[string]string{"Location": store.URL + "/blob?sig=1"}})
	src.Timeout = 300 * time.Millisecond
	_, err := src.Find(context.Background(), ArtifactName(check), wintest.TempDir(t), Want{Model: "Qwen3-0.6B", CheckName: check}, judge.Limits{RateSource: judge.RateClient})
	if kind := kindOf(err); kind != "not found" || !strings.Contains(err.Error(), "took longer than 300ms") {
		t.Errorf("Find() = %s: %v; want the deadline's notice", kind, err)
	}
}

// A run whose head repository is null (a deleted fork's), or another
// owner's of the same name, or the same in other letter case, is judged by
// its full name: only the repository's own, in any case, is taken.
func TestHeadRepository(t *testing.T) {
	for head, taken := range map[string]bool{
		`null`:                             false,
		`{}`:                               false,
		`{"full_name": "mallory/serve"}`:   false,
		`{"full_name": "acme/serve-fork"}`: false,
		`{"full_name": "ACME/Serve"}`:      true,
	} {
		t.Run(head, func(t *testing.T) {
			src, _ := runsAPI(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("event") != "push" {
					fmt.Fprint(w, `{"total_count": 0, "workflow_runs": []}`)
					return
				}
				fmt.Fprintf(w, `{"total_count": 1, "workflow_runs": [{"id": 9, "head_branch": "release/1.2", "event": "push", "status": "completed", "conclusion": "success", "head_repository": %s}]}`, head)
			})
			runs, err := src.Runs(context.Background(), 5)
			if err != nil || (len(runs) == 1) != taken {
				t.Errorf("Runs() with head_repository %s = %v, %v; want taken %v", head, runs, err, taken)
			}
		})
	}
}
