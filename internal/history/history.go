// Package history finds earlier runs of the gate in GitHub's Actions
// history: the latest successful run of a workflow on a branch or tag
// pattern, its artifact for one job, downloaded (bounded, checked to be a zip
// with no path that leaves its directory) and read back as a run's result,
// checked to be of the same model and check before it is a baseline.
package history

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// Prefix starts a --baseline that names history instead of a file:
// github:PATTERN, PATTERN a branch or tag name with * (not /), ** and ?.
const Prefix = "github:"

// MaxZip bounds an artifact's download.
const MaxZip = 64 << 20

// maxRuns bounds the runs looked through for a pattern: 5 pages of 100.
const maxRuns = 500

// Spec is the pattern of a --baseline github:PATTERN, ok false when s names
// a file. A bad pattern is an error.
func Spec(s string) (pattern string, ok bool, err error) {
	pattern, ok = strings.CutPrefix(s, Prefix)
	if !ok {
		return "", false, nil
	}
	if _, err := patternRE(pattern); err != nil || pattern == "" {
		return "", true, fmt.Errorf("--baseline %s: %q is not a branch or tag pattern; pass e.g. github:release/1.2 or github:release/**", s, pattern)
	}
	return pattern, true, nil
}

// patternRE turns a branch filter as workflows write them (* within a path
// segment, ** across them, ? one character) into an anchored expression.
func patternRE(p string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		case p[i] < ' ' || p[i] == 0x7f:
			return nil, fmt.Errorf("control character")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// Source is where earlier runs are looked for: one workflow's runs in one
// repository, on branches or tags matching Pattern.
type Source struct {
	Client      *github.Client
	Owner, Repo string
	Workflow    string // the workflow's file name, e.g. release-gate-matrix.yml
	Pattern     string
	ThisRun     int64        // never its own baseline
	Download    *http.Client // fetches the signed URL, with no token; nil: a plain client
	MaxZip      int64        // 0: MaxZip

	artifacts map[int64][]*github.Artifact // by run
}

// WorkflowFile is the workflow's file name from GITHUB_WORKFLOW_REF
// (owner/repo/.github/workflows/NAME.yml@ref).
func WorkflowFile(ref string) (string, error) {
	p, _, _ := strings.Cut(ref, "@")
	if !strings.Contains(p, "/.github/workflows/") || path.Base(p) == "" {
		return "", fmt.Errorf("GITHUB_WORKFLOW_REF %q names no workflow file; a baseline from github: needs a run inside GitHub Actions", ref)
	}
	return path.Base(p), nil
}

// NotFound is a baseline that does not exist (yet): the run goes on without
// the baseline assertion and says so.
type NotFound struct{ Why string }

func (e *NotFound) Error() string { return e.Why }

// BadInput is a baseline that exists and cannot be one: another model or
// check, too large, not a zip, a path that leaves its directory. Exit 2.
type BadInput struct{ Why string }

func (e *BadInput) Error() string { return e.Why }

// Run is an earlier run found for the pattern.
type Run struct {
	ID     int64
	Branch string
	SHA    string
	URL    string
	When   time.Time
}

// Runs gives the latest successful runs of the workflow on the pattern,
// newest first, at most n, never this run.
func (s *Source) Runs(ctx context.Context, n int) ([]Run, error) {
	re, err := patternRE(s.Pattern)
	if err != nil {
		return nil, &BadInput{fmt.Sprintf("--baseline github:%s is not a pattern", s.Pattern)}
	}
	opts := &github.ListWorkflowRunsOptions{Status: "success", ListOptions: github.ListOptions{PerPage: 100}}
	if !strings.ContainsAny(s.Pattern, "*?") {
		opts.Branch = s.Pattern
	}
	var out []Run
	for seen := 0; seen < maxRuns; {
		runs, resp, err := s.Client.Actions.ListWorkflowRunsByFileName(ctx, s.Owner, s.Repo, s.Workflow, opts)
		var nf *NotFound
		if err != nil && errors.As(apiError(err, ""), &nf) {
			return nil, &NotFound{fmt.Sprintf("no run of %s in %s/%s (HTTP 404: GitHub knows no workflow of that file name there yet)", s.Workflow, s.Owner, s.Repo)}
		}
		if err != nil {
			return nil, apiError(err, fmt.Sprintf("the runs of workflow %s", s.Workflow))
		}
		for _, r := range runs.WorkflowRuns {
			seen++
			if r.GetID() == s.ThisRun || r.GetConclusion() != "success" || !re.MatchString(r.GetHeadBranch()) {
				continue
			}
			out = append(out, Run{ID: r.GetID(), Branch: r.GetHeadBranch(), SHA: r.GetHeadSHA(), URL: r.GetHTMLURL(), When: r.GetCreatedAt().Time})
			if len(out) == n {
				return out, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// Latest is the latest successful run on the pattern; a *NotFound when
// there is none.
func (s *Source) Latest(ctx context.Context) (Run, error) {
	runs, err := s.Runs(ctx, 1)
	if err != nil {
		return Run{}, err
	}
	if len(runs) == 0 {
		return Run{}, &NotFound{fmt.Sprintf("no successful run of %s on %s", s.Workflow, s.Pattern)}
	}
	return runs[0], nil
}

// Want is what a baseline must be the same as: the model ("": checked by
// the caller) and the check name (which names the device and the serve).
type Want struct {
	Model     string
	CheckName string
	Thinking  string
}

// ArtifactName is the artifact of a job, named after its check name: runs of
// characters other than letters, digits, '.' and '_' become one '-'. The
// check "npu serve smoke (Qwen3-0.6B, npu)" uploads "npu-serve-smoke-Qwen3-0.6B-npu".
func ArtifactName(checkName string) string {
	var b strings.Builder
	dash := false
	for _, c := range checkName {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_'
		if ok {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(c)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

// Result downloads the artifact named name from run into a fresh directory
// under tmp and reads it as a run's result, checked against want.
func (s *Source) Result(ctx context.Context, run Run, name, tmp string, want Want) (*report.Result, error) {
	a, err := s.artifact(ctx, run, name)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("artifact %s of run %d (%s on %s)", name, run.ID, run.URL, run.Branch)
	if a.GetExpired() {
		return nil, &NotFound{where + " has expired"}
	}
	max := s.MaxZip
	if max <= 0 {
		max = MaxZip
	}
	if a.GetSizeInBytes() > max {
		return nil, &BadInput{fmt.Sprintf("%s is %d bytes, more than the %d a baseline may be; upload out/ without large files, or pass a baseline file", where, a.GetSizeInBytes(), max)}
	}
	b, err := s.download(ctx, a, max)
	if err != nil {
		var bad *BadInput
		if errors.As(err, &bad) {
			return nil, &BadInput{where + ": " + bad.Why}
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	dir, err := os.MkdirTemp(tmp, "baseline-*")
	if err != nil {
		return nil, err
	}
	if err := Extract(b, dir); err != nil {
		os.RemoveAll(dir)
		return nil, &BadInput{fmt.Sprintf("%s: %v", where, err)}
	}
	res, err := report.Read(dir)
	if err != nil {
		return nil, &BadInput{fmt.Sprintf("%s: %v", where, err)}
	}
	if err := same(res, want); err != nil {
		return nil, &BadInput{fmt.Sprintf("%s %v; a baseline must be a run of the same job", where, err)}
	}
	return res, nil
}

func same(res *report.Result, want Want) error {
	switch {
	case want.Model != "" && res.Run.Model != want.Model:
		return fmt.Errorf("is a run of model %q, not %q", res.Run.Model, want.Model)
	case res.Run.CheckName != want.CheckName:
		return fmt.Errorf("is a run of check %q, not %q", res.Run.CheckName, want.CheckName)
	case want.Thinking != "" && res.Run.Thinking != want.Thinking:
		return fmt.Errorf("ran with thinking %s, not %s", res.Run.Thinking, want.Thinking)
	}
	return nil
}

// Baseline is a result's medians, figured as the limits judge them now.
func Baseline(res *report.Result, from string, l judge.Limits) (*judge.Baseline, error) {
	rates, firstMS, _ := judge.Figures(res.Replies, l)
	if len(rates) == 0 || len(firstMS) == 0 {
		return nil, &BadInput{fmt.Sprintf("%s holds no decode rate and first token to compare with (verdict %s)", from, res.Verdict)}
	}
	return &judge.Baseline{File: from, Rate: judge.Median(rates), FirstTokenMS: judge.Median(firstMS)}, nil
}

// artifact finds the artifact named name among run's, listed once a run.
func (s *Source) artifact(ctx context.Context, run Run, name string) (*github.Artifact, error) {
	if s.artifacts == nil {
		s.artifacts = map[int64][]*github.Artifact{}
	}
	list, ok := s.artifacts[run.ID]
	if !ok {
		opts := &github.ListOptions{PerPage: 100}
		for {
			page, resp, err := s.Client.Actions.ListWorkflowRunArtifacts(ctx, s.Owner, s.Repo, run.ID, opts)
			if err != nil {
				return nil, apiError(err, fmt.Sprintf("the artifacts of run %d", run.ID))
			}
			list = append(list, page.Artifacts...)
			if resp.NextPage == 0 {
				break
			}
			opts.Page = resp.NextPage
		}
		s.artifacts[run.ID] = list
	}
	var found *github.Artifact
	for _, a := range list {
		// The newest of a name: a re-run job replaces its artifact.
		if a.GetName() == name && (found == nil || a.GetCreatedAt().After(found.GetCreatedAt().Time)) {
			found = a
		}
	}
	if found == nil {
		return nil, &NotFound{fmt.Sprintf("run %d (%s on %s) has no artifact %s", run.ID, run.URL, run.Branch, name)}
	}
	return found, nil
}

// download fetches an artifact's zip: the API answers with a redirect to a
// signed URL on a storage host, fetched without the token, at most max bytes.
func (s *Source) download(ctx context.Context, a *github.Artifact, max int64) ([]byte, error) {
	u, resp0, err := s.Client.Actions.DownloadArtifact(ctx, s.Owner, s.Repo, a.GetID(), 3)
	if err != nil {
		// The redirect is not checked as other answers are: its status is
		// all there is.
		if resp0 != nil {
			err = &github.ErrorResponse{Response: resp0.Response, Message: resp0.Status}
		}
		return nil, apiError(err, "the download")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	hc := s.Download
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the download failed: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the download answered %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("the download failed: %v", err)
	}
	if int64(len(b)) > max {
		return nil, &BadInput{fmt.Sprintf("the download is more than the %d bytes a baseline may be", max)}
	}
	return b, nil
}

// Extract writes what a baseline needs of an artifact's zip (result.json,
// reply_N.json, warmup_N.json at its top) into dir. A zip with an entry whose
// path would leave dir, a link, an entry that grows past the bound, or two
// entries of one path (which copy counts would depend on the reader) is
// refused whole.
func Extract(b []byte, dir string) error {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return fmt.Errorf("not a zip archive (%v)", err)
	}
	seen := map[string]bool{}
	for _, f := range zr.File {
		name := f.Name
		clean := path.Clean(strings.TrimSuffix(name, "/"))
		if seen[clean] {
			return fmt.Errorf("the entry %q is in the archive twice; refused", clean)
		}
		seen[clean] = true
		if strings.Contains(name, `\`) || !filepath.IsLocal(filepath.FromSlash(strings.TrimSuffix(name, "/"))) {
			return fmt.Errorf("the entry %q leaves the archive's directory; refused", name)
		}
		if m := f.Mode(); !m.IsRegular() && !m.IsDir() {
			return fmt.Errorf("the entry %q is not a regular file (%v); refused", name, m.Type())
		}
	}
	for _, f := range zr.File {
		if !wanted.MatchString(f.Name) {
			continue
		}
		if f.UncompressedSize64 > maxFile {
			return fmt.Errorf("the entry %q is %d bytes, more than %d", f.Name, f.UncompressedSize64, maxFile)
		}
		if err := extractFile(f, filepath.Join(dir, f.Name)); err != nil {
			return err
		}
	}
	return nil
}

const maxFile = 16 << 20

var wanted = regexp.MustCompile(`^(result\.json|(reply|warmup)_\d+\.json)$`)

func extractFile(f *zip.File, dst string) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("the entry %q cannot be read (%v)", f.Name, err)
	}
	defer rc.Close()
	// The header's size may lie: read one byte past the bound.
	b, err := io.ReadAll(io.LimitReader(rc, maxFile+1))
	if err != nil {
		return fmt.Errorf("the entry %q cannot be read (%v)", f.Name, err)
	}
	if len(b) > maxFile {
		return fmt.Errorf("the entry %q is more than %d bytes", f.Name, maxFile)
	}
	return os.WriteFile(dst, b, 0o644)
}

// apiError says what a failed call means and what to grant.
func apiError(err error, what string) error {
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil {
		switch ge.Response.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return &BadInput{fmt.Sprintf("%s cannot be read: HTTP %d (%s); grant the job `permissions: actions: read`", what, ge.Response.StatusCode, ge.Message)}
		case http.StatusNotFound:
			return &NotFound{fmt.Sprintf("%s: HTTP 404 (%s)", what, ge.Message)}
		case http.StatusGone:
			return &NotFound{fmt.Sprintf("%s: HTTP 410, expired", what)}
		}
	}
	return fmt.Errorf("%s cannot be read: %v", what, err)
}
