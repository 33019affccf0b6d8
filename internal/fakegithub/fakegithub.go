// Package fakegithub is a fake of the parts of GitHub's REST API the gate
// uses: check runs, issue comments (with pagination), pull requests, the
// authenticated user, and workflow runs with their artifacts (zip downloads
// behind a redirect). It checks what a real client sends the way GitHub does
// (authentication, required fields, length limits), acts as the identity a
// token has (an app installation's bot or a user, as the author of its
// comments and the app of its check runs), answers in GitHub's shapes, can be
// told to fail (5xx, 403, the secondary rate limit with Retry-After), and
// records every call for tests to compare.
package fakegithub

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits GitHub enforces.
const (
	CommentLimit   = 65536 // characters in a comment body
	CheckTextLimit = 65535 // characters in output.summary and output.text
	PerPageMax     = 100
)

// Comment is an issue comment.
type Comment struct {
	ID       int64  `json:"id"`
	Body     string `json:"body"`
	User     string `json:"-"`
	UserType string `json:"-"`
}

// Identity is who a token acts as. An app installation's token (GITHUB_TOKEN
// is one, of the GitHub Actions app) acts as the app's bot user,
// "SLUG[bot]" of type Bot: its comments are the bot's and its check runs
// the app's; GET /user answers it 403. A user's token (a personal access
// token) acts as the user: GET /user names them, and GitHub refuses them
// check runs, which only apps may create.
type Identity struct {
	Login string
	Type  string // "Bot" or "User"
	App   string // the app's slug, for an installation's token
}

// GitHubActions is the identity of a workflow's GITHUB_TOKEN.
var GitHubActions = Identity{Login: "github-actions[bot]", Type: "Bot", App: "github-actions"}

// User is the identity of a person's token.
func User(login string) Identity { return Identity{Login: login, Type: "User"} }

// Fault makes matching calls fail: Times times (0: always), with Status,
// Header and Body.
type Fault struct {
	Method string
	Path   *regexp.Regexp
	Status int
	Times  int
	Header map[string]string
	Body   string
}

// Call is one request the fake answered.
type Call struct {
	Method string
	Path   string // without any API prefix (e.g. /api/v3)
	Query  string
	Status int
	Body   map[string]any
	Time   time.Time // when it was answered
}

// Server is the fake API. Make one with New.
type Server struct {
	mu        sync.Mutex
	tokens    map[string]Identity
	nextID    int64
	checks    map[int64]map[string]any
	comments  map[int][]*Comment
	pulls     map[int]string // number: head sha
	runs      []*WorkflowRun
	artifacts []*Artifact
	faults    []*Fault
	calls     []Call
	// ignoreEvent: the runs list drops its event= filter.
	ignoreEvent bool
}

// New returns a fake that accepts token as a workflow's GITHUB_TOKEN (the
// GitHub Actions app's installation).
func New(token string) *Server {
	s := &Server{tokens: map[string]Identity{}, nextID: 1, checks: map[int64]map[string]any{}, comments: map[int][]*Comment{}, pulls: map[int]string{}}
	s.AddToken(token, GitHubActions)
	return s
}

// AddToken makes token act as who.
func (s *Server) AddToken(token string, who Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = who
}

// Fail adds a fault.
func (s *Server) Fail(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// AddComments puts n comments by another person ("someone") on pull request
// pr, with bodies from body(i).
func (s *Server) AddComments(pr, n int, body func(i int) string) {
	for i := range n {
		s.AddComment(pr, User("someone"), body(i))
	}
}

// AddComment puts a comment by author on pull request pr, and returns its id.
func (s *Server) AddComment(pr int, author Identity, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Comment{ID: s.id(), Body: body, User: author.Login, UserType: author.Type}
	s.comments[pr] = append(s.comments[pr], c)
	return c.ID
}

// SetPull makes pull request n exist with head sha.
func (s *Server) SetPull(n int, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n] = sha
}

// Calls is every call so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Comments is pull request pr's comments.
func (s *Server) Comments(pr int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments[pr] {
		out = append(out, *c)
	}
	return out
}

// CheckRuns is every check run as last written, by id order.
func (s *Server) CheckRuns() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for id := range s.checks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []map[string]any
	for _, id := range ids {
		out = append(out, s.checks[id])
	}
	return out
}

// Log is the calls, one line each, in a stable form for golden files:
// method, path, status, and the fields of the body that do not change from
// run to run.
func (s *Server) Log() string {
	var b strings.Builder
	for _, c := range s.Calls() {
		fmt.Fprintf(&b, "%s %s", c.Method, c.Path)
		if c.Query != "" {
			fmt.Fprintf(&b, "?%s", c.Query)
		}
		fmt.Fprintf(&b, " %d", c.Status)
		for _, k := range []string{"name", "head_sha", "status", "conclusion"} {
			if v, ok := c.Body[k]; ok {
				fmt.Fprintf(&b, " %s=%v", k, v)
			}
		}
		if body, ok := c.Body["body"].(string); ok {
			first, _, _ := strings.Cut(body, "\n")
			fmt.Fprintf(&b, " body=%q...", first)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *Server) id() int64 {
	id := s.nextID
	s.nextID++
	return id
}

var (
	prefix     = regexp.MustCompile(`^.*?/repos/`)
	checkRuns  = regexp.MustCompile(`^/repos/[^/]+/[^/]+/check-runs$`)
	checkRun   = regexp.MustCompile(`^/repos/[^/]+/[^/]+/check-runs/(\d+)$`)
	issueComms = regexp.MustCompile(`^/repos/[^/]+/[^/]+/issues/(\d+)/comments$`)
	issueComm  = regexp.MustCompile(`^/repos/[^/]+/[^/]+/issues/comments/(\d+)$`)
	pull       = regexp.MustCompile(`^/repos/[^/]+/[^/]+/pulls/(\d+)$`)
)

// user is the path of the authenticated user, which ServeHTTP gets with no
// /repos/ in it.
const userPath = "/user"

// ServeHTTP answers as GitHub would.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, BlobPath) {
		s.serveBlob(w, r)
		return
	}
	path := prefix.ReplaceAllString(r.URL.Path, "/repos/")
	if strings.HasSuffix(r.URL.Path, userPath) && !strings.Contains(r.URL.Path, "/repos/") {
		path = userPath
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var body map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			s.answer(w, r, path, nil, http.StatusBadRequest, nil, msg("Problems parsing JSON"))
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		token, _ = strings.CutPrefix(auth, "token ")
	}
	who, ok := s.tokens[token]
	if !ok {
		s.answer(w, r, path, body, http.StatusUnauthorized, nil, msg("Bad credentials"))
		return
	}
	for _, f := range s.faults {
		if f.Method == r.Method && f.Path.MatchString(path) && f.Times >= 0 {
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					f.Times = -1 // spent
				}
			}
			status := f.Status
			respBody := f.Body
			if respBody == "" {
				respBody = fmt.Sprintf(`{"message":"%s","documentation_url":"https://docs.github.com/rest"}`, http.StatusText(status))
			}
			s.answerRaw(w, r, path, body, status, f.Header, respBody)
			return
		}
	}

	switch {
	case r.Method == http.MethodGet && path == userPath:
		if who.App != "" {
			s.answer(w, r, path, body, http.StatusForbidden, nil, msg("Resource not accessible by integration"))
			return
		}
		s.answer(w, r, path, body, http.StatusOK, nil, map[string]any{"login": who.Login, "type": who.Type})
	case r.Method == http.MethodPost && checkRuns.MatchString(path):
		if who.App == "" {
			s.answer(w, r, path, body, http.StatusForbidden, nil, msg("You must authenticate via a GitHub App."))
			return
		}
		if err := checkCheckRun(body, true); err != "" {
			s.answer(w, r, path, body, http.StatusUnprocessableEntity, nil, invalid("CheckRun", err))
			return
		}
		id := s.id()
		body["id"] = id
		body["app"] = map[string]any{"slug": who.App}
		s.checks[id] = body
		s.answer(w, r, path, body, http.StatusCreated, nil, body)
	case r.Method == http.MethodPatch && checkRun.MatchString(path):
		id, _ := strconv.ParseInt(checkRun.FindStringSubmatch(path)[1], 10, 64)
		cr, ok := s.checks[id]
		if !ok {
			s.answer(w, r, path, body, http.StatusNotFound, nil, msg("Not Found"))
			return
		}
		if err := checkCheckRun(body, false); err != "" {
			s.answer(w, r, path, body, http.StatusUnprocessableEntity, nil, invalid("CheckRun", err))
			return
		}
		for k, v := range body {
			cr[k] = v
		}
		s.answer(w, r, path, body, http.StatusOK, nil, cr)
	case r.Method == http.MethodGet && issueComms.MatchString(path):
		n, _ := strconv.Atoi(issueComms.FindStringSubmatch(path)[1])
		s.listComments(w, r, path, n)
	case r.Method == http.MethodPost && issueComms.MatchString(path):
		n, _ := strconv.Atoi(issueComms.FindStringSubmatch(path)[1])
		text, err := commentBody(body)
		if err != "" {
			s.answer(w, r, path, body, http.StatusUnprocessableEntity, nil, invalid("IssueComment", err))
			return
		}
		c := &Comment{ID: s.id(), Body: text, User: who.Login, UserType: who.Type}
		s.comments[n] = append(s.comments[n], c)
		s.answer(w, r, path, body, http.StatusCreated, nil, commentJSON(c))
	case r.Method == http.MethodPatch && issueComm.MatchString(path):
		id, _ := strconv.ParseInt(issueComm.FindStringSubmatch(path)[1], 10, 64)
		c := s.findComment(id)
		if c == nil {
			s.answer(w, r, path, body, http.StatusNotFound, nil, msg("Not Found"))
			return
		}
		text, err := commentBody(body)
		if err != "" {
			s.answer(w, r, path, body, http.StatusUnprocessableEntity, nil, invalid("IssueComment", err))
			return
		}
		c.Body = text
		s.answer(w, r, path, body, http.StatusOK, nil, commentJSON(c))
	case r.Method == http.MethodGet && pull.MatchString(path):
		n, _ := strconv.Atoi(pull.FindStringSubmatch(path)[1])
		sha, ok := s.pulls[n]
		if !ok {
			s.answer(w, r, path, body, http.StatusNotFound, nil, msg("Not Found"))
			return
		}
		s.answer(w, r, path, body, http.StatusOK, nil, map[string]any{"number": n, "head": map[string]any{"sha": sha}})
	case s.serveActions(w, r, path):
	default:
		s.answer(w, r, path, body, http.StatusNotFound, nil, msg("Not Found"))
	}
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request, path string, n int) {
	all := s.comments[n]
	from, to, h := pages(r, len(all))
	out := []map[string]any{}
	for _, c := range all[from:to] {
		out = append(out, commentJSON(c))
	}
	s.answer(w, r, path, nil, http.StatusOK, h, out)
}

func (s *Server) findComment(id int64) *Comment {
	for _, cs := range s.comments {
		for _, c := range cs {
			if c.ID == id {
				return c
			}
		}
	}
	return nil
}

func commentJSON(c *Comment) map[string]any {
	return map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.User, "type": c.UserType}}
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, path string, body map[string]any, status int, header map[string]string, v any) {
	b, _ := json.Marshal(v)
	s.answerRaw(w, r, path, body, status, header, string(b))
}

func (s *Server) answerRaw(w http.ResponseWriter, r *http.Request, path string, body map[string]any, status int, header map[string]string, resp string) {
	s.calls = append(s.calls, Call{Method: r.Method, Path: path, Query: r.URL.RawQuery, Status: status, Body: clone(body), Time: time.Now()})
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, resp)
}

func msg(m string) map[string]any {
	return map[string]any{"message": m, "documentation_url": "https://docs.github.com/rest"}
}

func invalid(resource, message string) map[string]any {
	return map[string]any{
		"message": "Validation Failed",
		"errors":  []any{map[string]any{"resource": resource, "code": "custom", "message": message}},
	}
}

var sha = regexp.MustCompile(`^[0-9a-f]{40}$`)

// checkCheckRun validates a check run body as GitHub does; "" when valid.
func checkCheckRun(b map[string]any, create bool) string {
	if name, _ := b["name"].(string); create && name == "" {
		return "name is missing"
	}
	if h, _ := b["head_sha"].(string); create && !sha.MatchString(h) {
		return fmt.Sprintf("head_sha %q is not a commit SHA", h)
	}
	status, _ := b["status"].(string)
	if status != "" && !slices.Contains([]string{"queued", "in_progress", "completed"}, status) {
		return "status is not one of queued, in_progress, completed"
	}
	conclusion, hasConclusion := b["conclusion"].(string)
	if status == "completed" && !hasConclusion {
		return "conclusion is required when status is completed"
	}
	if hasConclusion && !slices.Contains([]string{"success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"}, conclusion) {
		return "conclusion is not valid"
	}
	if out, ok := b["output"].(map[string]any); ok {
		title, _ := out["title"].(string)
		summary, _ := out["summary"].(string)
		if title == "" || summary == "" {
			return "output needs title and summary"
		}
		for _, k := range []string{"summary", "text"} {
			if t, _ := out[k].(string); utf8.RuneCountInString(t) > CheckTextLimit {
				return fmt.Sprintf("output.%s is too long (maximum is %d characters)", k, CheckTextLimit)
			}
		}
	}
	return ""
}

func commentBody(b map[string]any) (string, string) {
	text, ok := b["body"].(string)
	switch {
	case !ok || text == "":
		return "", "Body cannot be blank"
	case utf8.RuneCountInString(text) > CommentLimit:
		return "", fmt.Sprintf("Body is too long (maximum is %d characters)", CommentLimit)
	}
	return text, ""
}

// clone is a deep copy of a JSON object, so a call's record does not change
// with the state it created.
func clone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}
