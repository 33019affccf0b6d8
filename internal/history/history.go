// Package history finds earlier runs of the gate in GitHub's Actions
// history: the latest successful run of a workflow on a branch or tag
// pattern that the repository's own code made (a push, a run by hand, a
// release; never a pull request's), its artifact for one job, downloaded
// (bounded, checked to be a zip with no path that leaves its directory,
// extracted within bounds) and read back as a run's result, checked to be of
// the same model and check before it is a baseline. A candidate that cannot
// serve is skipped for the next older one; the whole look is bounded in
// pages, candidates and time.
package history

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// maxPages bounds the pages of runs read for each event: the newest 500
// runs of each.
const maxPages = 5

// Events are the events whose runs ran the repository's own code: a push of
// a branch or tag, a run by hand, a release. A pull_request run runs its
// head's code (a fork's, from a fork) and is listed under the head's branch
// name, so it is never a baseline.
var Events = []string{"push", "workflow_dispatch", "release"}

// Candidates bounds the runs tried for one baseline: the newest run whose
// artifact can serve among the newest Candidates on the pattern.
const Candidates = 5

// FetchTimeout is the one deadline of a whole look through history (runs,
// artifacts, downloads) when Source.Timeout is 0.
const FetchTimeout = 5 * time.Minute

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
	// GitHub lists a run's branch or tag by its short name, and git allows
	// none of these characters in one: such a pattern would match nothing,
	// a notice on every run instead of a baseline.
	for _, ref := range []string{"refs/heads/", "refs/tags/"} {
		if short, ok := strings.CutPrefix(pattern, ref); ok {
			return "", true, fmt.Errorf("--baseline %s: runs are listed by their branch or tag name, without %s; pass github:%s", s, ref, short)
		}
	}
	switch {
	case strings.Contains(pattern, "["):
		return "", true, fmt.Errorf("--baseline %s: character classes ([...]) are not supported; use ? (one character), * (within a path segment) or ** (across them)", s)
	case strings.HasPrefix(pattern, "!"):
		return "", true, fmt.Errorf("--baseline %s: a negation (!) is not supported; name the branches or tags to take, e.g. github:release/**", s)
	}
	if dir, ok := strings.CutSuffix(pattern, "/"); ok {
		return "", true, fmt.Errorf("--baseline %s: no branch or tag name ends with /; pass github:%s/** for every branch or tag under %s/", s, dir, dir)
	}
	for _, bad := range []string{"..", "//", "@{"} {
		if strings.Contains(pattern, bad) {
			return "", true, fmt.Errorf("--baseline %s: %q cannot be in a branch or tag name, so the pattern matches none; pass e.g. github:release/1.2 or github:release/**", s, bad)
		}
	}
	if i := strings.IndexAny(pattern, " ~^:\\"); i >= 0 {
		return "", true, fmt.Errorf("--baseline %s: %q cannot be in a branch or tag name, so the pattern matches none; pass e.g. github:release/1.2 or github:release/**", s, pattern[i])
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
	Client      *github.Client // its transport wrapped by APITransport
	Owner, Repo string
	Workflow    string // the workflow's file name, e.g. release-gate-matrix.yml
	Pattern     string
	ThisRun     int64         // never its own baseline
	Download    *http.Client  // fetches the signed URL, with no token; nil: a plain client
	MaxZip      int64         // 0: MaxZip
	Timeout     time.Duration // the whole look's deadline; 0: FetchTimeout

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

// NotFound is a baseline that does not exist (yet), or a look that GitHub
// failed or its bounds cut: the run goes on without the baseline assertion
// and says so.
type NotFound struct{ Why string }

func (e *NotFound) Error() string { return e.Why }

// BadInput is a look through history that cannot be made as asked: a bad
// pattern, a token that may not read the runs. Exit 2.
type BadInput struct{ Why string }

func (e *BadInput) Error() string { return e.Why }

// Unusable is a candidate whose artifact cannot be a baseline: another model
// or check, too large, not a zip, unsafe, no result.json, no figures, a
// download that failed. The next older candidate is tried.
type Unusable struct{ Why string }

func (e *Unusable) Error() string { return e.Why }

// Deadline gives ctx the one deadline of a whole look through history; an
// answer cut by it is a *NotFound saying so.
func (s *Source) Deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.Timeout
	if d <= 0 {
		d = FetchTimeout
	}
	return context.WithTimeoutCause(ctx, d, &NotFound{fmt.Sprintf("the look through GitHub's history took longer than %v, its bound", d)})
}

// stopped is err, or a *NotFound when ctx ended the look.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	var nf *NotFound
	if errors.As(context.Cause(ctx), &nf) {
		return nf
	}
	return &NotFound{fmt.Sprintf("the look through GitHub's history was stopped (%v)", context.Cause(ctx))}
}

// Run is an earlier run found for the pattern.
type Run struct {
	ID     int64
	Branch string
	SHA    string
	URL    string
	When   time.Time
	Event  string // push, workflow_dispatch or release
}

// Runs gives the latest successful runs of the workflow on the pattern that
// the repository's own code made, newest first, at most n, never this run.
// The runs are asked for by event (the API takes one event a query), and
// each run's event and head repository are checked again here. A list that
// repeats a page, or sends an empty page with a next link, is not read
// further: a *NotFound.
func (s *Source) Runs(ctx context.Context, n int) ([]Run, error) {
	re, err := patternRE(s.Pattern)
	if err != nil {
		return nil, &BadInput{fmt.Sprintf("--baseline github:%s is not a pattern", s.Pattern)}
	}
	var out []Run
	capped := false
	for _, event := range Events {
		runs, full, err := s.runs(ctx, re, event, n)
		if err != nil {
			return nil, err
		}
		out = append(out, runs...)
		capped = capped || full
	}
	slices.SortStableFunc(out, func(a, b Run) int {
		if c := b.When.Compare(a.When); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if len(out) > n {
		out = out[:n]
	}
	if len(out) == 0 && capped {
		return nil, &NotFound{fmt.Sprintf("no run in the newest %d of each event (%s) of %s is a successful run on %s", maxPages*100, strings.Join(Events, ", "), s.Workflow, s.Pattern)}
	}
	return out, nil
}

// runs is Runs for one event; capped is true when the page bound stopped it.
func (s *Source) runs(ctx context.Context, re *regexp.Regexp, event string, n int) (out []Run, capped bool, err error) {
	opts := &github.ListWorkflowRunsOptions{Status: "success", Event: event, ListOptions: github.ListOptions{PerPage: 100}}
	if !strings.ContainsAny(s.Pattern, "*?") {
		opts.Branch = s.Pattern
	}
	own := s.Owner + "/" + s.Repo
	read := map[int]bool{}
	for pages := 0; ; pages++ {
		if pages == maxPages {
			return out, true, nil
		}
		page := max(opts.Page, 1)
		read[page] = true
		runs, resp, err := s.Client.Actions.ListWorkflowRunsByFileName(ctx, s.Owner, s.Repo, s.Workflow, opts)
		var ge *github.ErrorResponse
		if err != nil && ctx.Err() == nil && errors.As(err, &ge) && ge.Response != nil && ge.Response.StatusCode == http.StatusNotFound {
			return nil, false, &NotFound{fmt.Sprintf("no run of %s in %s/%s (HTTP 404: GitHub knows no workflow of that file name there yet, or the token may not see the repository's runs: a token other than the job's GITHUB_TOKEN needs actions: read on it)", s.Workflow, s.Owner, s.Repo)}
		}
		if err != nil {
			return nil, false, stopped(ctx, apiError(err, fmt.Sprintf("the runs of workflow %s", s.Workflow)))
		}
		for _, r := range runs.WorkflowRuns {
			if r.GetID() == s.ThisRun || r.GetConclusion() != "success" || !re.MatchString(r.GetHeadBranch()) ||
				r.GetEvent() != event || !strings.EqualFold(r.GetHeadRepository().GetFullName(), own) {
				continue
			}
			out = append(out, Run{ID: r.GetID(), Branch: r.GetHeadBranch(), SHA: r.GetHeadSHA(), URL: r.GetHTMLURL(), When: r.GetCreatedAt().Time, Event: event})
			if len(out) == n {
				return out, false, nil
			}
		}
		switch {
		case resp.NextPage == 0:
			return out, false, nil
		case len(runs.WorkflowRuns) == 0:
			return nil, false, &NotFound{fmt.Sprintf("the API answered an empty page %d of the %s runs of %s with a link to a next one; the list is not read further", page, event, s.Workflow)}
		case read[resp.NextPage]:
			return nil, false, &NotFound{fmt.Sprintf("the API's list of the %s runs of %s names page %d again after page %d; the list is not read further", event, s.Workflow, resp.NextPage, page)}
		}
		opts.Page = resp.NextPage
	}
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

// Found is the baseline a look through history found, and each newer
// candidate it skipped, with why.
type Found struct {
	Run      Run
	Result   *report.Result
	Baseline *judge.Baseline
	Skipped  []string
}

// Find looks for the baseline of the job whose artifact is name: the newest
// of the newest Candidates runs on the pattern whose artifact can serve, all
// under one deadline. A candidate that cannot serve is named in Skipped and
// the next older one is tried; none that can: a *NotFound (Found still names
// the ones skipped).
func (s *Source) Find(ctx context.Context, name, tmp string, want Want, l judge.Limits) (*Found, error) {
	var bl *judge.Baseline
	f, err := s.find(ctx, name, tmp, want, func(res *report.Result, from string) (err error) {
		bl, err = Serves(res, from, l)
		return err
	})
	if err == nil {
		f.Baseline = bl
	}
	return f, err
}

// ReferenceArtifact is the artifact a reference recorded for the job of the
// check name is uploaded as: the job's own artifact name (ArtifactName)
// with "-reference", so a workflow run that records a reference and gates
// the same job keeps both.
func ReferenceArtifact(checkName string) string {
	return ArtifactName(checkName) + "-reference"
}

// FindReference looks for a reference of the job whose reference artifact
// is name, as Find looks for a baseline: the newest of the newest Candidates
// runs on the pattern whose artifact holds a run recorded by record (run.kind
// "reference") that passed, of the same check and thinking setting, and that
// use accepts (the caller's checks: max_tokens, prompts). One that does not
// is skipped, with why, for the next older.
func (s *Source) FindReference(ctx context.Context, name, tmp string, want Want, use func(res *report.Result, from string) error) (*Found, error) {
	return s.find(ctx, name, tmp, want, func(res *report.Result, from string) error {
		if err := IsReference(res); err != nil {
			return err
		}
		return use(res, from)
	})
}

// IsReference says why a run found in history cannot be a reference: it was
// not recorded by record, or did not pass.
func IsReference(res *report.Result) error {
	if res.Run.Kind != report.KindReference {
		return &Unusable{fmt.Sprintf("it is not a recorded reference (run.kind %s); a reference is recorded by npu-serve-smoke record", short(res.Run.Kind))}
	}
	if v := res.Verdict; v != report.Pass {
		if v != report.Fail && v != report.Cancelled {
			v = short(v)
		}
		return &Unusable{fmt.Sprintf("its verdict is %s; a reference is a recording that passed", v)}
	}
	return nil
}

// IsRun says why a result cannot be a baseline by its kind: a recording
// (run.kind "reference", made by record) passed on its content and release
// alone, its route, rate and first token recorded, not judged, so the
// trusted slow route's rate would become the bar a run is held to, and
// --floor-from-baseline would lower the floor to it.
func IsRun(res *report.Result) error {
	if res.Run.Kind != report.KindRun {
		return &Unusable{fmt.Sprintf("it is a recording (run.kind %s), not a run the gate judged; a baseline is a run (a recording's route, rate and first token are recorded, not judged)", short(res.Run.Kind))}
	}
	return nil
}

// find is Find with the candidate's own test: accept says why a result that
// is the same job's cannot serve.
func (s *Source) find(ctx context.Context, name, tmp string, want Want, accept func(res *report.Result, from string) error) (*Found, error) {
	ctx, cancel := s.Deadline(ctx)
	defer cancel()
	f := &Found{}
	runs, err := s.Runs(ctx, Candidates)
	if err != nil {
		return f, err
	}
	if len(runs) == 0 {
		return f, &NotFound{fmt.Sprintf("no successful run of %s on %s", s.Workflow, s.Pattern)}
	}
	for _, run := range runs {
		res, err := s.Result(ctx, run, name, tmp, want)
		if err == nil {
			if err = accept(res, run.URL); err != nil {
				err = &Unusable{fmt.Sprintf("artifact %s of run %d (%s on %s): %v", name, run.ID, run.URL, run.Branch, err)}
			}
		}
		var nf *NotFound
		var un *Unusable
		switch {
		case err == nil:
			f.Run, f.Result = run, res
			return f, nil
		case ctx.Err() != nil:
			return f, stopped(ctx, err)
		case errors.As(err, &un), errors.As(err, &nf):
			f.Skipped = append(f.Skipped, err.Error())
		default:
			return f, err
		}
	}
	return f, &NotFound{fmt.Sprintf("none of the %d newest successful runs of %s on %s holds %s that can serve", len(runs), s.Workflow, s.Pattern, what(name))}
}

// what is what a look for the artifact name finds.
func what(name string) string {
	if strings.HasSuffix(name, "-reference") {
		return "a reference"
	}
	return "a baseline"
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
		return nil, &Unusable{fmt.Sprintf("%s is %d bytes, more than the %d a baseline may be; upload out/ without large files", where, a.GetSizeInBytes(), max)}
	}
	b, err := s.download(ctx, a, max)
	if err != nil {
		// Only a token that may not download is the run's bad input, and
		// the deadline ends the whole look. Any other failure (the storage
		// host refuses the signed URL or cuts the body, the API fails the
		// redirect) is this candidate's: it would recur on every later run
		// while the run is the newest on the pattern.
		var un *Unusable
		var bi *BadInput
		switch {
		case ctx.Err() != nil:
			return nil, stopped(ctx, err)
		case errors.As(err, &bi):
			return nil, &BadInput{where + ": " + bi.Why}
		case errors.As(err, &un):
			return nil, &Unusable{where + ": " + un.Why}
		}
		return nil, &Unusable{where + ": " + err.Error()}
	}
	dir, err := os.MkdirTemp(tmp, "baseline-*")
	if err != nil {
		return nil, err
	}
	// The files are read back and removed: a later candidate or job finds
	// tmp as it was.
	defer os.RemoveAll(dir)
	if err := Extract(b, dir); err != nil {
		return nil, &Unusable{fmt.Sprintf("%s: %v", where, err)}
	}
	res, err := report.Read(dir)
	if err != nil {
		return nil, &Unusable{fmt.Sprintf("%s: %v", where, err)}
	}
	if err := same(res, want); err != nil {
		return nil, &Unusable{fmt.Sprintf("%s %v; a baseline must be a run of the same job", where, err)}
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

// Serves is the baseline a candidate from history gives: a run that passed,
// its medians as Baseline figures them. A run whose gate failed can still be
// a successful workflow run (continue-on-error), and its figures, a
// regression's, would lower the floor --floor-from-baseline derives.
func Serves(res *report.Result, from string, l judge.Limits) (*judge.Baseline, error) {
	if v := res.Verdict; v != report.Pass {
		if v != report.Fail && v != report.Cancelled {
			v = short(v)
		}
		return nil, &Unusable{fmt.Sprintf("its verdict is %s; a baseline is a run that passed", v)}
	}
	return Baseline(res, from, l)
}

// Baseline is a result's medians, figured as the limits judge them now; a
// recording is never one (IsRun).
func Baseline(res *report.Result, from string, l judge.Limits) (*judge.Baseline, error) {
	if err := IsRun(res); err != nil {
		return nil, err
	}
	rates, firstMS, _ := judge.Figures(res.Replies, l)
	if len(rates) == 0 || len(firstMS) == 0 {
		return nil, &Unusable{fmt.Sprintf("%s holds no decode rate and first token to compare with (verdict %s)", from, res.Verdict)}
	}
	b := judge.BaselineOf(from, rates, firstMS)
	if why := b.NotFigures(); why != "" {
		return nil, &Unusable{fmt.Sprintf("%s is no rate and first token to compare with: %s", from, why)}
	}
	return &b, nil
}

// artifact finds the artifact named name among run's, listed once a run.
func (s *Source) artifact(ctx context.Context, run Run, name string) (*github.Artifact, error) {
	if s.artifacts == nil {
		s.artifacts = map[int64][]*github.Artifact{}
	}
	list, ok := s.artifacts[run.ID]
	if !ok {
		opts := &github.ListOptions{PerPage: 100}
		read := map[int]bool{}
		for {
			page, resp, err := s.Client.Actions.ListWorkflowRunArtifacts(ctx, s.Owner, s.Repo, run.ID, opts)
			if err != nil {
				return nil, stopped(ctx, apiError(err, fmt.Sprintf("the artifacts of run %d", run.ID)))
			}
			list = append(list, page.Artifacts...)
			read[max(opts.Page, 1)] = true
			if resp.NextPage == 0 {
				break
			}
			if len(page.Artifacts) == 0 || read[resp.NextPage] || len(read) == maxPages {
				return nil, &Unusable{fmt.Sprintf("the artifacts of run %d (%s on %s) are not listed in at most %d pages without an empty or repeated one; the list is not read further", run.ID, run.URL, run.Branch, maxPages)}
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

// download fetches an artifact's zip: the API answers with a 302 (or a 307)
// to a signed URL on a storage host, fetched with a client of its own that
// sends no token and follows no further redirect. Any other redirect is
// refused: followed by the API's client, it would carry the token to the
// host it names. At most max bytes.
func (s *Source) download(ctx context.Context, a *github.Artifact, max int64) ([]byte, error) {
	// maxRedirects 0: go-github follows a 301 itself, through the client
	// that adds the token.
	u, resp0, err := s.Client.Actions.DownloadArtifact(ctx, s.Owner, s.Repo, a.GetID(), 0)
	if err != nil {
		if resp0 == nil || resp0.Response == nil {
			return nil, stopped(ctx, apiError(err, "the download"))
		}
		loc := resp0.Header.Get("Location")
		switch st := resp0.StatusCode; {
		case st == http.StatusTemporaryRedirect:
			if u, err = url.Parse(loc); err != nil {
				return nil, &Unusable{fmt.Sprintf("the download answered %s to %s, not a URL", resp0.Status, short(loc))}
			}
		case st >= 300 && st < 400:
			return nil, &Unusable{fmt.Sprintf("the download answered %s to %s; only a 302 or 307 to the storage host is followed (without the token), so it is refused", resp0.Status, short(loc))}
		default:
			// The redirect is not checked as other answers are: its
			// status is all there is.
			return nil, stopped(ctx, apiError(&github.ErrorResponse{Response: resp0.Response, Message: resp0.Status}, "the download"))
		}
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return nil, &Unusable{fmt.Sprintf("the download's redirect names %s, not a web address; refused", short(u.String()))}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	hc := http.Client{Timeout: 5 * time.Minute}
	if s.Download != nil {
		hc = *s.Download
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return nil, stopped(ctx, fmt.Errorf("the download failed: %v", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the download from the storage host answered %s (no redirect from it is followed)", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, stopped(ctx, fmt.Errorf("the download failed: %v", err))
	}
	if int64(len(b)) > max {
		return nil, &Unusable{fmt.Sprintf("the download is more than the %d bytes a baseline may be", max)}
	}
	return b, nil
}

// The bounds of an extraction, whatever the zip: a baseline's files are a
// result.json and a reply file per reply, a few hundred KiB for a run of
// --max-replies 100.
const (
	maxFile    = 16 << 20 // one entry written (report.MaxFile, what is read back)
	maxTotal   = 32 << 20 // all the entries written
	maxEntries = 10_000   // entries in the archive, whether written or not
	// maxObjects bounds the JSON objects (each '{', strings' included) in
	// all the entries written: read back, an object of 3 bytes (an empty
	// arrival) is a struct of 16 in a slice that doubles as it grows. A
	// run of 100 replies of 4096 tokens, each its own arrival, has 410,000.
	maxObjects = 1_000_000
)

// wanted are the files a baseline reads: its result.json and the replies.
// Warm-ups are never judged and never written.
var wanted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(result\.json|reply_\d+\.json)$`) })

// centralHeader starts each entry of a zip's central directory: counting it
// in the bytes bounds the entries before archive/zip holds them all.
var centralHeader = []byte("PK\x01\x02")

// Extract writes what a baseline needs of an artifact's zip (result.json
// and reply_N.json at its top) into dir. A zip with more than 10000
// entries, an entry whose path would leave dir, a link, two entries of one
// path (which copy counts would depend on the reader), an entry of more than
// 16 MiB, or entries to write of more than 32 MiB together, is refused
// whole. Each entry is copied to its file as it is inflated, never held.
func Extract(b []byte, dir string) error {
	// Each entry has a central header, so this counts at least the
	// entries (compressed bytes may add to it, never take away).
	if n := bytes.Count(b, centralHeader); n > maxEntries {
		return fmt.Errorf("the archive has more than %d entries (%d headers); refused", maxEntries, n)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return fmt.Errorf("not a zip archive (%v)", err)
	}
	if len(zr.File) > maxEntries {
		return fmt.Errorf("the archive has %d entries, more than %d; refused", len(zr.File), maxEntries)
	}
	seen := map[string]bool{}
	var total uint64
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
		if !wanted().MatchString(name) {
			continue
		}
		if f.UncompressedSize64 > maxFile {
			return fmt.Errorf("the entry %q is %d bytes, more than %d", name, f.UncompressedSize64, maxFile)
		}
		if total += f.UncompressedSize64; total > maxTotal {
			return fmt.Errorf("the entries a baseline reads (result.json, reply_N.json) come to more than the %d bytes a baseline may be; refused", maxTotal)
		}
	}
	// The headers' sizes were summed; archive/zip refuses an entry that
	// inflates past its header's size, and each copy is bounded again.
	left := int64(maxTotal)
	objects := &objectCount{left: maxObjects}
	for _, f := range zr.File {
		if !wanted().MatchString(f.Name) {
			continue
		}
		n, err := extractFile(f, filepath.Join(dir, f.Name), min(maxFile, left), objects)
		if err != nil {
			return err
		}
		left -= n
	}
	return nil
}

// objectCount counts the JSON objects copied, '{' by '{', and fails a
// write past its bound.
type objectCount struct{ left int }

func (c *objectCount) Write(p []byte) (int, error) {
	if c.left -= bytes.Count(p, []byte("{")); c.left < 0 {
		return 0, fmt.Errorf("the entries a baseline reads hold more than %d JSON objects, more than a run's replies do (one arrival a token); refused", maxObjects)
	}
	return len(p), nil
}

// extractFile copies entry f to a new file dst, at most max bytes, counting
// its objects in objects.
func extractFile(f *zip.File, dst string, max int64, objects *objectCount) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("the entry %q cannot be read (%v)", f.Name, err)
	}
	defer rc.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	// The header's size may lie: copy one byte past the bound.
	n, err := io.Copy(io.MultiWriter(objects, out), io.LimitReader(rc, max+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil || n > max {
		os.Remove(dst)
	}
	switch {
	case objects.left < 0:
		return n, err
	case err != nil:
		return n, fmt.Errorf("the entry %q cannot be read (%v)", f.Name, err)
	case n > max:
		return n, fmt.Errorf("the entry %q is more than %d bytes, or the entries a baseline reads come to more than %d; refused", f.Name, max, maxTotal)
	}
	return n, nil
}

// short is untrusted text from an answer, quoted on one line and bounded.
func short(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
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
	// A failure of GitHub's (a 5xx after the retries, an answer that is
	// not one) is no fault of the run's input: the look ends, or the
	// candidate is skipped, with a notice.
	return &NotFound{fmt.Sprintf("%s cannot be read: %v", what, err)}
}

// MaxAnswer bounds each answer of GitHub's API read through APITransport: a
// page of 100 runs is some 500 KiB.
const MaxAnswer = 8 << 20

// APITransport wraps base (nil: http.DefaultTransport) for the API client
// of a look through history. No answer's body is read past MaxAnswer bytes,
// counted after any gzip the transport inflates: go-github decodes an
// answer whole, so an endless or inflating one would be held in memory
// until the deadline. And no redirect to another host (or from https to
// http) is followed: the client adds the token to every request it sends,
// the redirected ones too, so following it would hand the token to that
// host. A redirect on the API's own host (GitHub's 301 for a renamed
// repository) is followed.
func APITransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return apiTransport{base}
}

type apiTransport struct{ base http.RoundTripper }

func (l apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// Response is set on a request the client makes to follow a redirect.
	if prev := req.Response; prev != nil && prev.Request != nil {
		from := prev.Request.URL
		if !strings.EqualFold(req.URL.Host, from.Host) || from.Scheme == "https" && req.URL.Scheme != "https" {
			return nil, fmt.Errorf("the API redirected to another host (%s, from %s); not followed, so that the token is not sent there", short(req.URL.Redacted()), short(from.Redacted()))
		}
	}
	resp, err := l.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	resp.Body = &boundedBody{rc: resp.Body, left: MaxAnswer, url: req.URL.Redacted()}
	return resp, nil
}

type boundedBody struct {
	rc   io.ReadCloser
	left int64
	url  string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the answer of %s is more than the %d bytes an answer may be; not read further", b.url, MaxAnswer)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
