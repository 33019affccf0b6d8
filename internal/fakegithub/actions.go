package fakegithub

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WorkflowRun is a run of a workflow, as the Actions API lists it.
type WorkflowRun struct {
	ID         int64
	Workflow   string // the file, e.g. .github/workflows/release-gate-matrix.yml
	HeadBranch string // a branch, or the tag of a tag push
	HeadSHA    string
	// HeadRepo is the repository the run's code came from, owner/name: a
	// fork's for a pull request from a fork; "": the repository itself.
	HeadRepo   string
	Event      string // push, pull_request, ...; "": push
	Status     string // queued, in_progress, completed
	Conclusion string // success, failure, cancelled, ... when completed
	Created    time.Time
}

// Artifact is a run's artifact: a zip archive, stored as uploaded.
type Artifact struct {
	ID      int64
	RunID   int64
	Name    string
	Zip     []byte
	Size    int64 // size_in_bytes as listed; 0: len(Zip)
	Expired bool
	Created time.Time
}

// BlobPath is where artifact downloads redirect to: a storage host that
// takes a signed URL and no Authorization header, as GitHub's does.
const BlobPath = "/_blob/artifacts/"

// AddRun adds a workflow run and gives its id (assigned when r.ID is 0).
func (s *Server) AddRun(r WorkflowRun) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.ID == 0 {
		r.ID = s.id()
	}
	if r.Status == "" {
		r.Status = "completed"
	}
	if r.Event == "" {
		r.Event = "push"
	}
	if r.Created.IsZero() {
		r.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(len(s.runs)) * time.Hour)
	}
	s.runs = append(s.runs, &r)
	return r.ID
}

// AddArtifact adds an artifact to run runID and gives its id.
func (s *Server) AddArtifact(a Artifact) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.ID = s.id()
	if a.Size == 0 {
		a.Size = int64(len(a.Zip))
	}
	if a.Created.IsZero() {
		a.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	s.artifacts = append(s.artifacts, &a)
	return a.ID
}

var (
	workflowRuns = regexp.MustCompile(`^/repos/[^/]+/[^/]+/actions/workflows/([^/]+)/runs$`)
	repoRuns     = regexp.MustCompile(`^/repos/[^/]+/[^/]+/actions/runs$`)
	runArtifacts = regexp.MustCompile(`^/repos/[^/]+/[^/]+/actions/runs/(\d+)/artifacts$`)
	artifactZip  = regexp.MustCompile(`^/repos/[^/]+/[^/]+/actions/artifacts/(\d+)/(\w+)$`)
)

// serveActions answers the Actions API's runs and artifacts; false when the
// request is none of them. s.mu is held.
func (s *Server) serveActions(w http.ResponseWriter, r *http.Request, p string) bool {
	if r.Method != http.MethodGet {
		return false
	}
	switch {
	case workflowRuns.MatchString(p):
		s.listRuns(w, r, p, workflowRuns.FindStringSubmatch(p)[1])
	case repoRuns.MatchString(p):
		s.listRuns(w, r, p, "")
	case runArtifacts.MatchString(p):
		id, _ := strconv.ParseInt(runArtifacts.FindStringSubmatch(p)[1], 10, 64)
		if s.run(id) == nil {
			s.answer(w, r, p, nil, http.StatusNotFound, nil, msg("Not Found"))
			return true
		}
		var list []map[string]any
		name := r.URL.Query().Get("name")
		for _, a := range s.artifacts {
			if a.RunID == id && (name == "" || a.Name == name) {
				list = append(list, s.artifactJSON(r, a))
			}
		}
		from, to, h := pages(r, len(list))
		s.answer(w, r, p, nil, http.StatusOK, h, map[string]any{"total_count": len(list), "artifacts": orEmpty(list[from:to])})
	case artifactZip.MatchString(p):
		m := artifactZip.FindStringSubmatch(p)
		id, _ := strconv.ParseInt(m[1], 10, 64)
		a := s.artifact(id)
		switch {
		case a == nil:
			s.answer(w, r, p, nil, http.StatusNotFound, nil, msg("Not Found"))
		case m[2] != "zip":
			s.answer(w, r, p, nil, http.StatusUnprocessableEntity, nil, msg("Unsupported archive_format"))
		case a.Expired:
			s.answer(w, r, p, nil, http.StatusGone, nil, msg("Artifact has expired"))
		default:
			// GitHub answers 302 with a short-lived signed URL on another
			// host; the client must not send its token there.
			loc := fmt.Sprintf("http://%s%s%d?sig=%s", r.Host, BlobPath, a.ID, s.signature(a.ID))
			s.answerRaw(w, r, p, nil, http.StatusFound, map[string]string{"Location": loc}, "")
		}
	default:
		return false
	}
	return true
}

// serveBlob answers a download from the storage host: the signature must
// be the one the redirect gave, and an Authorization header is refused.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := r.URL.Path
	record := func(status int) {
		s.calls = append(s.calls, Call{Method: r.Method, Path: p, Status: status, Time: time.Now()})
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(p, BlobPath), 10, 64)
	a := s.artifact(id)
	switch {
	case r.Header.Get("Authorization") != "":
		record(http.StatusBadRequest)
		http.Error(w, "AuthenticationFailed: the signed URL takes no Authorization header", http.StatusBadRequest)
	case err != nil || a == nil || r.URL.Query().Get("sig") != s.signature(id):
		record(http.StatusForbidden)
		http.Error(w, "AuthorizationFailure: signature does not match", http.StatusForbidden)
	default:
		record(http.StatusOK)
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Zip)))
		w.Write(a.Zip)
	}
}

// signature is what the redirect's URL carries: a client must use the URL
// it was given, not make one.
func (s *Server) signature(id int64) string {
	return fmt.Sprintf("%016x", uint64(id)*0x9e3779b97f4a7c15)
}

// listRuns lists workflow runs, newest first, filtered as GitHub filters:
// branch, event, status (a status or a conclusion), head_sha.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, p, workflow string) {
	q := r.URL.Query()
	if workflow != "" && !slices.ContainsFunc(s.runs, func(run *WorkflowRun) bool { return path.Base(run.Workflow) == workflow }) {
		s.answer(w, r, p, nil, http.StatusNotFound, nil, msg("Not Found"))
		return
	}
	var list []*WorkflowRun
	for _, run := range s.runs {
		switch st := q.Get("status"); {
		case workflow != "" && path.Base(run.Workflow) != workflow,
			q.Get("branch") != "" && run.HeadBranch != q.Get("branch"),
			q.Get("event") != "" && run.Event != q.Get("event") && !s.ignoreEvent,
			q.Get("head_sha") != "" && run.HeadSHA != q.Get("head_sha"),
			st != "" && st != run.Status && st != run.Conclusion:
			continue
		}
		list = append(list, run)
	}
	slices.SortStableFunc(list, func(a, b *WorkflowRun) int { return b.Created.Compare(a.Created) })
	from, to, h := pages(r, len(list))
	out := []map[string]any{}
	repo := repoOf(p)
	for _, run := range list[from:to] {
		head := run.HeadRepo
		if head == "" {
			head = repo
		}
		out = append(out, map[string]any{
			"id": run.ID, "name": path.Base(run.Workflow), "path": run.Workflow, "head_branch": run.HeadBranch,
			"head_sha": run.HeadSHA, "event": run.Event, "status": run.Status, "conclusion": nullable(run.Conclusion),
			"created_at": run.Created.Format(time.RFC3339), "html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d", repo, run.ID),
			"repository":      repoJSON(repo, false),
			"head_repository": repoJSON(head, head != repo),
		})
	}
	s.answer(w, r, p, nil, http.StatusOK, h, map[string]any{"total_count": len(list), "workflow_runs": out})
}

func (s *Server) artifactJSON(r *http.Request, a *Artifact) map[string]any {
	api := "http://" + r.Host + strings.TrimSuffix(r.URL.Path, fmt.Sprintf("/runs/%d/artifacts", a.RunID))
	run := s.run(a.RunID)
	return map[string]any{
		"id": a.ID, "name": a.Name, "size_in_bytes": a.Size, "expired": a.Expired,
		"url":                  fmt.Sprintf("%s/artifacts/%d", api, a.ID),
		"archive_download_url": fmt.Sprintf("%s/artifacts/%d/zip", api, a.ID),
		"created_at":           a.Created.Format(time.RFC3339),
		"expires_at":           a.Created.Add(90 * 24 * time.Hour).Format(time.RFC3339),
		"workflow_run":         map[string]any{"id": run.ID, "head_branch": run.HeadBranch, "head_sha": run.HeadSHA},
	}
}

func (s *Server) run(id int64) *WorkflowRun {
	for _, r := range s.runs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func (s *Server) artifact(id int64) *Artifact {
	for _, a := range s.artifacts {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// pages is the slice [from, to) of n items the request's page and per_page
// ask for, and the Link header GitHub sends when there are more.
func pages(r *http.Request, n int) (from, to int, header map[string]string) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, PerPageMax)
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	last := max(1, (n+per-1)/per)
	from, to = min(n, (page-1)*per), min(n, page*per)
	if page < last {
		link := func(p int) string {
			v := url.Values{}
			for k, vs := range q {
				v[k] = vs
			}
			v.Set("page", strconv.Itoa(p))
			v.Set("per_page", strconv.Itoa(per))
			return "http://" + r.Host + r.URL.Path + "?" + v.Encode()
		}
		header = map[string]string{"Link": fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, link(page+1), link(last))}
	}
	return from, to, header
}

// repoJSON is a repository as a run lists it: a fork's full name is its
// own owner's.
func repoJSON(fullName string, fork bool) map[string]any {
	owner, name, _ := strings.Cut(fullName, "/")
	return map[string]any{"full_name": fullName, "name": name, "owner": map[string]any{"login": owner}, "fork": fork}
}

// IgnoreEvent makes the runs list answer as if no event= were asked, as an
// API that drops the filter would: the client must check each run's event.
func (s *Server) IgnoreEvent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreEvent = true
}

func orEmpty(xs []map[string]any) []map[string]any {
	if xs == nil {
		return []map[string]any{}
	}
	return xs
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func repoOf(p string) string {
	parts := strings.SplitN(strings.TrimPrefix(p, "/repos/"), "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "/" + parts[1]
}
