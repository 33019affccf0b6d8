package publish

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v60/github"
	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

const (
	token   = "ghs_fake_token_123"
	headSHA = "1111111111111111111111111111111111111111"
	mergeSH = "2222222222222222222222222222222222222222"
)

func ptr[T any](v T) *T { return &v }

func result(t *testing.T, verdictPass bool) *report.Result {
	t.Helper()
	rate := 90.0
	if !verdictPass {
		rate = 1.9
	}
	r := &report.Result{
		Schema: report.Schema,
		Limits: judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateClient},
		Run:    report.RunFacts{Started: time.Unix(1700000000, 0), Finished: time.Unix(1700000060, 0), Out: "/tmp/out", CheckName: "npu serve smoke"},
	}
	for i := 1; i <= 3; i++ {
		r.Replies = append(r.Replies, measure.Reply{N: i, Content: "Paris.", FirstMS: ptr(250.0), LastMS: ptr(250 + 127/rate*1000), CompletionTokens: ptr(128)})
	}
	m, _ := route.NewMatcher(route.DefaultFast, route.DefaultSlow)
	if verdictPass {
		m.Line([]byte("ready on the private route dx"))
	} else {
		m.Line([]byte("using the per-op forward"))
	}
	r.Route = m.Evidence()
	r.Judged(judge.Judge(r.Input()))
	return r
}

type harness struct {
	gh      *fakegithub.Server
	srv     *httptest.Server
	ctx     *Context
	sleeps  []time.Duration
	notices []string
}

func newHarness(t *testing.T, c Context) *harness {
	t.Helper()
	h := &harness{gh: fakegithub.New(token)}
	h.srv = httptest.NewServer(h.gh)
	t.Cleanup(h.srv.Close)
	if c.APIURL == "" {
		c.APIURL = h.srv.URL
	} else {
		c.APIURL = h.srv.URL + c.APIURL
	}
	c.Owner, c.Repo, c.ServerURL, c.RunID = "acme", "serve", "https://github.com", "77"
	h.ctx = &c
	return h
}

func (h *harness) publisher(t *testing.T, comment bool) *Publisher {
	t.Helper()
	return h.publisherWith(t, token, comment)
}

// publisherWith posts with tok, which the fake must know (New, AddToken).
func (h *harness) publisherWith(t *testing.T, tok string, comment bool) *Publisher {
	t.Helper()
	retry := DefaultRetry()
	retry.Sleep = func(_ context.Context, d time.Duration) error { h.sleeps = append(h.sleeps, d); return nil }
	client, err := NewClient(h.ctx, tok, retry, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Publisher{Client: client, Ctx: h.ctx, CheckName: "npu serve smoke", Comment: comment,
		Notice: func(f string, a ...any) { h.notices = append(h.notices, fmt.Sprintf(f, a...)) }}
}

func (h *harness) run(t *testing.T, comment bool, res *report.Result) int64 {
	p := h.publisher(t, comment)
	p.Start(context.Background(), res.Run.Started)
	return p.Finish(context.Background(), res, report.Markdown(res, CheckTextLimit))
}

func TestPush(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "push"})
	id := h.run(t, true, result(t, true))
	want := `POST /repos/acme/serve/check-runs 201 name=npu serve smoke head_sha=` + headSHA + ` status=in_progress
PATCH /repos/acme/serve/check-runs/1 200 name=npu serve smoke status=completed conclusion=success
`
	if diff := cmp.Diff(want, h.gh.Log()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if id != 1 || len(h.notices) != 0 {
		t.Errorf("Finish() = %d, notices %q; want check run 1 and no notice", id, h.notices)
	}
	cr := h.gh.CheckRuns()[0]
	out := cr["output"].(map[string]any)
	if title := out["title"].(string); !strings.HasPrefix(title, "PASS: median 90.0 tok/s (floor 60.0)") {
		t.Errorf("title = %q", title)
	}
	if cr["details_url"] != "https://github.com/acme/serve/actions/runs/77" {
		t.Errorf("details_url = %v", cr["details_url"])
	}
	if s := out["summary"].(string); !strings.Contains(s, "npu serve smoke: PASS") {
		t.Errorf("summary lacks the verdict: %.200s", s)
	}
	if s := out["text"].(string); !strings.Contains(s, "| 1 | 250.0 ms | 90.00 tok/s | 128 (usage) |") {
		t.Errorf("text lacks each reply: %.400s", s)
	}
}

func TestPullRequestStickyComment(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7})
	h.run(t, true, result(t, false))
	h.run(t, true, result(t, true))
	want := `POST /repos/acme/serve/check-runs 201 name=npu serve smoke head_sha=` + headSHA + ` status=in_progress
PATCH /repos/acme/serve/check-runs/1 200 name=npu serve smoke status=completed conclusion=failure
GET /repos/acme/serve/issues/7/comments?per_page=100 200
POST /repos/acme/serve/issues/7/comments 201 body="<!-- npu-serve-smoke: npu serve smoke -->"...
POST /repos/acme/serve/check-runs 201 name=npu serve smoke head_sha=` + headSHA + ` status=in_progress
PATCH /repos/acme/serve/check-runs/3 200 name=npu serve smoke status=completed conclusion=success
GET /repos/acme/serve/issues/7/comments?per_page=100 200
PATCH /repos/acme/serve/issues/comments/2 200 body="<!-- npu-serve-smoke: npu serve smoke -->"...
`
	if diff := cmp.Diff(want, h.gh.Log()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	cs := h.gh.Comments(7)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "npu serve smoke: PASS") {
		t.Errorf("comments = %+v, want one, edited to the second run's PASS", cs)
	}
}

func TestCommentOnPageThree(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7})
	marker := Marker("npu serve smoke")
	for i := range 250 {
		switch i {
		case 10:
			h.gh.AddComment(7, fakegithub.GitHubActions, "quoting it: "+marker) // not at the start: not ours
		case 20:
			h.gh.AddComment(7, fakegithub.User("someone"), marker+"\nanyone can write the marker") // not the bot's
		case 230:
			h.gh.AddComment(7, fakegithub.GitHubActions, marker+"\nan earlier run")
		default:
			h.gh.AddComment(7, fakegithub.User("someone"), fmt.Sprintf("comment %d", i))
		}
	}
	h.run(t, true, result(t, true))
	var paths []string
	for _, c := range h.gh.Calls() {
		if strings.Contains(c.Path, "comments") {
			paths = append(paths, c.Method+" "+c.Path+" "+c.Query)
		}
	}
	want := []string{
		"GET /repos/acme/serve/issues/7/comments per_page=100",
		"GET /repos/acme/serve/issues/7/comments page=2&per_page=100",
		"GET /repos/acme/serve/issues/7/comments page=3&per_page=100",
		"PATCH /repos/acme/serve/issues/comments/231 ",
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("comment calls (-want +got):\n%s", diff)
	}
	if cs := h.gh.Comments(7); len(cs) != 250 || !strings.Contains(cs[230].Body, "PASS") || cs[10].Body != "quoting it: "+marker || strings.Contains(cs[20].Body, "PASS") {
		t.Errorf("the sticky comment was not the one edited, or one was added")
	}
}

// The sticky comment is the one its token's own user wrote: the marker is
// public, so a comment anyone else wrote holding it is never edited.
func TestStickyCommentIsOurs(t *testing.T) {
	marker := Marker("npu serve smoke") + "\nan earlier run"
	alice := fakegithub.User("alice")
	tests := []struct {
		name   string
		token  string                // the publisher's: the fake's GITHUB_TOKEN unless a user's
		fail   string                // a path refused with 403
		before []fakegithub.Identity // authors of comments holding the marker
		want   int                   // the index in before of the comment edited, -1 for a new one
		user   bool                  // GET /user was asked
	}{
		{"GITHUB_TOKEN: the bot's comment, not another's", token, "", []fakegithub.Identity{fakegithub.User("mallory"), fakegithub.GitHubActions}, 1, false},
		{"GITHUB_TOKEN: no comment of the bot's", token, "", []fakegithub.Identity{fakegithub.User("mallory")}, -1, false},
		{"GITHUB_TOKEN: a user named as the bot is not the bot", token, "", []fakegithub.Identity{{Login: "github-actions[bot]", Type: "User"}}, -1, false},
		{"GITHUB_TOKEN: another app's bot", token, "", []fakegithub.Identity{{Login: "other[bot]", Type: "Bot", App: "other"}}, -1, false},
		{"GITHUB_TOKEN without checks: write: the bot, after GET /user is refused", token, "/check-runs$", []fakegithub.Identity{fakegithub.User("mallory"), fakegithub.GitHubActions}, 1, true},
		{"a user's token: the user's comment", "ghp_alice", "", []fakegithub.Identity{fakegithub.GitHubActions, alice, fakegithub.User("mallory")}, 1, true},
		{"a user's token: not the bot's", "ghp_alice", "", []fakegithub.Identity{fakegithub.GitHubActions}, -1, true},
	}
	for _, tt := range tests {
		h := newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7})
		h.gh.AddToken("ghp_alice", alice)
		if tt.fail != "" {
			h.gh.Fail(fakegithub.Fault{Method: "POST", Path: regexp.MustCompile(tt.fail), Status: 403, Body: `{"message":"Resource not accessible by integration"}`})
		}
		for _, who := range tt.before {
			h.gh.AddComment(7, who, marker)
		}
		p := h.publisherWith(t, tt.token, true)
		p.Start(context.Background(), time.Unix(1700000000, 0))
		p.Finish(context.Background(), result(t, true), "npu serve smoke: PASS")

		cs := h.gh.Comments(7)
		for i, who := range tt.before {
			if edited := cs[i].Body != marker; edited != (i == tt.want) {
				t.Errorf("%s: the comment of %+v edited = %v, want %v", tt.name, who, edited, i == tt.want)
			}
		}
		if added := len(cs) - len(tt.before); added != map[bool]int{true: 1, false: 0}[tt.want < 0] {
			t.Errorf("%s: %d comments added, want %d", tt.name, added, map[bool]int{true: 1, false: 0}[tt.want < 0])
		} else if tt.want < 0 {
			if last := cs[len(cs)-1]; last.User != map[bool]string{true: "alice", false: "github-actions[bot]"}[tt.token != token] {
				t.Errorf("%s: the new comment is by %s", tt.name, last.User)
			}
		}
		askedUser := strings.Contains(h.gh.Log(), "GET /user ")
		if askedUser != tt.user {
			t.Errorf("%s: GET /user asked = %v, want %v:\n%s", tt.name, askedUser, tt.user, h.gh.Log())
		}
		for _, n := range h.notices {
			if strings.Contains(n, "PR comment") {
				t.Errorf("%s: notice %q", tt.name, n)
			}
		}
	}
}

func TestStickyCommentUnknownAuthor(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7})
	h.gh.Fail(fakegithub.Fault{Method: "POST", Path: regexp.MustCompile(`/check-runs$`), Status: 403})
	h.gh.Fail(fakegithub.Fault{Method: "GET", Path: regexp.MustCompile(`^/user$`), Status: 404})
	h.gh.AddComment(7, fakegithub.GitHubActions, Marker("npu serve smoke")+"\nan earlier run")
	h.run(t, true, result(t, true))
	if cs := h.gh.Comments(7); len(cs) != 1 || strings.Contains(cs[0].Body, "PASS") {
		t.Errorf("comments = %+v, want none posted nor edited when the token's user is not known", cs)
	}
	if n := h.notices[len(h.notices)-1]; !strings.Contains(n, "PR comment not posted: who the token posts as is not known: HTTP 404") {
		t.Errorf("last notice = %q", n)
	}
}

func TestForkSkipped(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7, Fork: true})
	if id := h.run(t, true, result(t, true)); id != 0 {
		t.Errorf("Finish() = %d on a fork, want 0", id)
	}
	if len(h.gh.Calls()) != 0 {
		t.Errorf("calls on a fork: %s", h.gh.Log())
	}
	if len(h.notices) != 2 || !strings.Contains(h.notices[1], "comes from a fork") || !strings.Contains(h.notices[1], "npu-serve-smoke publish") {
		t.Errorf("notices = %q, want the fork named with what to do", h.notices)
	}
}

func TestRetries(t *testing.T) {
	checkRuns := regexp.MustCompile(`/check-runs$`)
	tests := []struct {
		name       string
		fault      fakegithub.Fault
		wantSleeps []time.Duration
		wantCalls  int // POST check-runs calls
		wantNotice string
		wantID     int64
	}{
		{"500 twice then 201: retried, posted once",
			fakegithub.Fault{Method: "POST", Path: checkRuns, Status: 500, Times: 2},
			[]time.Duration{time.Second, 2 * time.Second}, 3, "", 1},
		{"secondary rate limit with Retry-After",
			fakegithub.Fault{Method: "POST", Path: checkRuns, Status: 403, Times: 1, Header: map[string]string{"Retry-After": "3"},
				Body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`},
			[]time.Duration{3 * time.Second}, 2, "", 1},
		{"secondary rate limit named only in the body",
			fakegithub.Fault{Method: "POST", Path: checkRuns, Status: 403, Times: 1,
				Body: `{"message":"You have exceeded a secondary rate limit."}`},
			[]time.Duration{time.Minute}, 2, "", 1},
		{"429 with a wait past the bound: not retried, reported",
			fakegithub.Fault{Method: "POST", Path: checkRuns, Status: 429, Times: 1, Header: map[string]string{"Retry-After": "600"}},
			nil, 1, "HTTP 429", 0},
		{"always 502: four tries, then reported",
			fakegithub.Fault{Method: "POST", Path: checkRuns, Status: 502},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, 4, "HTTP 502", 0},
		{"403 without a rate limit: a missing permission, not retried",
			fakegithub.Fault{Method: "POST", Path: checkRuns, Status: 403, Body: `{"message":"Resource not accessible by integration"}`},
			nil, 1, "grant `permissions: checks: write`", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Context{SHA: headSHA, Event: "push"})
			h.gh.Fail(tt.fault)
			p := h.publisher(t, false)
			p.Start(context.Background(), time.Now())
			if diff := cmp.Diff(tt.wantSleeps, h.sleeps); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			n := 0
			for _, c := range h.gh.Calls() {
				if c.Method == "POST" {
					n++
				}
			}
			if n != tt.wantCalls {
				t.Errorf("POST check-runs %d times, want %d:\n%s", n, tt.wantCalls, h.gh.Log())
			}
			if p.checkID != tt.wantID {
				t.Errorf("check run id = %d, want %d", p.checkID, tt.wantID)
			}
			if tt.wantNotice == "" && len(h.notices) > 0 || tt.wantNotice != "" && (len(h.notices) != 1 || !strings.Contains(h.notices[0], tt.wantNotice)) {
				t.Errorf("notices = %q, want %q", h.notices, tt.wantNotice)
			}
			if len(h.gh.CheckRuns()) != int(tt.wantID) {
				t.Errorf("%d check runs stored, want %d", len(h.gh.CheckRuns()), tt.wantID)
			}
		})
	}
}

func TestForbiddenKeepsGoing(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7})
	h.gh.Fail(fakegithub.Fault{Method: "POST", Path: regexp.MustCompile(`/check-runs$`), Status: 403, Body: `{"message":"Resource not accessible by integration"}`})
	res := result(t, false)
	h.run(t, true, res)
	if len(h.notices) != 2 || !strings.Contains(h.notices[0], "checks: write") || !strings.Contains(h.notices[1], "checks: write") {
		t.Errorf("notices = %q, want both check run posts reported with the permission", h.notices)
	}
	if cs := h.gh.Comments(7); len(cs) != 1 {
		t.Errorf("comments = %d, want the comment posted all the same", len(cs))
	}
	if res.Verdict != report.Fail {
		t.Errorf("verdict = %s after a 403, want it unchanged", res.Verdict)
	}

	h = newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7})
	h.gh.Fail(fakegithub.Fault{Method: "GET", Path: regexp.MustCompile(`/comments$`), Status: 404})
	h.run(t, true, res)
	if len(h.notices) != 1 || !strings.Contains(h.notices[0], "PR comment not posted: HTTP 404") || !strings.Contains(h.notices[0], "pull-requests: write") {
		t.Errorf("notices = %q", h.notices)
	}
}

func TestOversize(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "pull_request", PR: 7})
	res := result(t, false)
	res.Serve.LogTail = []string{strings.Repeat("L", 1000)}
	for i := range res.Replies {
		res.Replies[i].Error = strings.Repeat("e", 5000)
	}
	for i := 4; i < 1500; i++ {
		res.Replies = append(res.Replies, measure.Reply{N: i, Prompt: strings.Repeat("p", 500), Content: strings.Repeat("c", 500)})
	}
	big := report.Markdown(res, 1<<30)
	if len(big) < 2*CommentLimit {
		t.Fatalf("the report is only %d bytes; the test needs one over the limits", len(big))
	}
	h.run(t, true, res)
	if len(h.notices) != 0 {
		t.Errorf("notices = %q: GitHub refused a post", h.notices)
	}
	cs := h.gh.Comments(7)
	if len(cs) != 1 || len(cs[0].Body) > CommentLimit || !strings.Contains(cs[0].Body, "This report was cut to") {
		t.Errorf("comment of %d bytes, want at most %d with a note", len(cs[0].Body), CommentLimit)
	}
	out := h.gh.CheckRuns()[0]["output"].(map[string]any)
	for _, k := range []string{"summary", "text"} {
		if s := out[k].(string); len(s) > CheckTextLimit || !strings.Contains(s, "cut to") {
			t.Errorf("check run %s of %d bytes, want at most %d with a note", k, len(s), CheckTextLimit)
		}
	}
	// The fake answers as GitHub does to a body over the limit.
	p := h.publisher(t, true)
	_, resp, err := p.Client.Issues.CreateComment(context.Background(), "acme", "serve", 7, &github.IssueComment{Body: ptr(strings.Repeat("x", CommentLimit+1))})
	if err == nil || resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "Body is too long") {
		t.Errorf("a comment over the limit: %v, want 422 Body is too long", err)
	}
}

func TestGHESPrefix(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "push", APIURL: "/api/v3"})
	h.run(t, false, result(t, true))
	if len(h.gh.CheckRuns()) != 1 || len(h.notices) != 0 {
		t.Errorf("on a GHES API URL: %d check runs, notices %q", len(h.gh.CheckRuns()), h.notices)
	}
}

func TestAbortAndBadToken(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "push"})
	p := h.publisher(t, false)
	p.Start(context.Background(), time.Now())
	p.Abort(context.Background(), "port 8080 is in use by pid 42 (llama-server)")
	cr := h.gh.CheckRuns()[0]
	if cr["conclusion"] != "failure" || !strings.Contains(cr["output"].(map[string]any)["summary"].(string), "port 8080 is in use") {
		t.Errorf("aborted check run = %v", cr)
	}

	h = newHarness(t, Context{SHA: headSHA, Event: "push"})
	p = h.publisher(t, false)
	p.Client, _ = NewClient(h.ctx, "wrong", DefaultRetry(), nil)
	p.Start(context.Background(), time.Now())
	if len(h.notices) != 1 || !strings.Contains(h.notices[0], "HTTP 401") {
		t.Errorf("notices with a bad token = %q", h.notices)
	}
	for _, n := range h.notices {
		if strings.Contains(n, token) || strings.Contains(n, "wrong") {
			t.Errorf("a notice shows the token: %q", n)
		}
	}
}

func TestCheckPR(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "workflow_run", PR: 7})
	h.gh.SetPull(7, headSHA)
	h.gh.SetPull(8, mergeSH)
	p := h.publisher(t, true)
	if err := p.CheckPR(context.Background()); err != nil {
		t.Errorf("CheckPR(#7 at the head) = %v", err)
	}
	h.ctx.PR = 8
	if err := p.CheckPR(context.Background()); err == nil || !strings.Contains(err.Error(), "not the measured commit") {
		t.Errorf("CheckPR(#8 elsewhere) = %v", err)
	}
	h.ctx.PR = 9
	if err := p.CheckPR(context.Background()); err == nil || !strings.Contains(err.Error(), "could not be read") {
		t.Errorf("CheckPR(#9 missing) = %v", err)
	}
}

func TestMarker(t *testing.T) {
	for name, want := range map[string]string{
		"npu serve smoke":            "<!-- npu-serve-smoke: npu serve smoke -->",
		"a --> b <!-- c\nd":          "<!-- npu-serve-smoke: a - -&gt; b <!- - c d -->",
		"npu serve smoke (Qwen3-8B)": "<!-- npu-serve-smoke: npu serve smoke (Qwen3-8B) -->",
	} {
		if got := Marker(name); got != want {
			t.Errorf("Marker(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestTitle(t *testing.T) {
	res := result(t, false)
	if got := Title(res); got != "FAIL: median 1.9 tok/s (floor 60.0); failed: route, rate" {
		t.Errorf("Title(fail) = %q", got)
	}
	res.Verdict = report.Cancelled
	if got := Title(res); got != "CANCELLED: median 1.9 tok/s (floor 60.0)" {
		t.Errorf("Title(cancelled) = %q", got)
	}
	res.Replies = nil
	res.Verdict = report.Fail
	if got := Title(res); !strings.HasPrefix(got, "FAIL; failed:") {
		t.Errorf("Title(no replies) = %q", got)
	}
}

func TestFromEnv(t *testing.T) {
	dir := wintest.TempDir(t)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	pr := write("pr.json", `{"number":7,"pull_request":{"number":7,"head":{"sha":"`+headSHA+`","repo":{"full_name":"acme/serve"}},"base":{"repo":{"full_name":"acme/serve"}}}}`)
	fork := write("fork.json", `{"pull_request":{"number":8,"head":{"sha":"`+headSHA+`","repo":{"full_name":"mallory/serve"}},"base":{"repo":{"full_name":"acme/serve"}}}}`)
	wr := write("wr.json", `{"workflow_run":{"head_sha":"`+headSHA+`","pull_requests":[{"number":9}],"head_repository":{"full_name":"Acme/Serve"},"repository":{"full_name":"acme/serve"}}}`)
	wrFork := write("wr-fork.json", `{"workflow_run":{"head_sha":"`+headSHA+`","pull_requests":[],"head_repository":{"full_name":"mallory/serve"},"repository":{"full_name":"acme/serve"}}}`)
	wrUnnamed := write("wr-unnamed.json", `{"workflow_run":{"head_sha":"`+headSHA+`","pull_requests":[]}}`)
	bad := write("bad.json", `{`)
	env := func(kv ...string) func(string) string {
		m := map[string]string{"GITHUB_REPOSITORY": "acme/serve", "GITHUB_SHA": mergeSH, "GITHUB_RUN_ID": "77"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name    string
		getenv  func(string) string
		want    Context
		wantErr string
	}{
		{"push", env("GITHUB_EVENT_NAME", "push"), Context{APIURL: "https://api.github.com", ServerURL: "https://github.com", Owner: "acme", Repo: "serve", SHA: mergeSH, Event: "push", RunID: "77"}, ""},
		{"pull_request: the head, not the merge commit", env("GITHUB_EVENT_PATH", pr, "GITHUB_API_URL", "https://ghes.example/api/v3/", "GITHUB_SERVER_URL", "https://ghes.example"),
			Context{APIURL: "https://ghes.example/api/v3", ServerURL: "https://ghes.example", Owner: "acme", Repo: "serve", SHA: headSHA, PR: 7, RunID: "77"}, ""},
		{"fork", env("GITHUB_EVENT_PATH", fork), Context{APIURL: "https://api.github.com", ServerURL: "https://github.com", Owner: "acme", Repo: "serve", SHA: headSHA, PR: 8, Fork: true, RunID: "77"}, ""},
		{"workflow_run", env("GITHUB_EVENT_PATH", wr), Context{APIURL: "https://api.github.com", ServerURL: "https://github.com", Owner: "acme", Repo: "serve", SHA: headSHA, PR: 9, RunID: "77"}, ""},
		{"workflow_run of a fork's run", env("GITHUB_EVENT_PATH", wrFork), Context{APIURL: "https://api.github.com", ServerURL: "https://github.com", Owner: "acme", Repo: "serve", SHA: headSHA, RunID: "77", EvidenceFrom: "mallory/serve"}, ""},
		{"workflow_run naming no head repository", env("GITHUB_EVENT_PATH", wrUnnamed), Context{APIURL: "https://api.github.com", ServerURL: "https://github.com", Owner: "acme", Repo: "serve", SHA: headSHA, RunID: "77", EvidenceFrom: "a repository the event does not name"}, ""},
		{"no repository", env("GITHUB_REPOSITORY", ""), Context{}, `GITHUB_REPOSITORY "" is not owner/repo`},
		{"unreadable event", env("GITHUB_EVENT_PATH", filepath.Join(dir, "none")), Context{}, "GITHUB_EVENT_PATH"},
		{"broken event", env("GITHUB_EVENT_PATH", bad), Context{}, "not an event payload"},
	}
	for _, tt := range tests {
		got, err := FromEnv(tt.getenv)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: FromEnv() error = %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: FromEnv() error = %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, *got); diff != "" {
			t.Errorf("%s: FromEnv() (-want +got):\n%s", tt.name, diff)
		}
	}
	c := Context{ServerURL: "https://github.com", Owner: "acme", Repo: "serve", RunID: "77", RunAttempt: "2"}
	if got := c.RunURL(); got != "https://github.com/acme/serve/actions/runs/77/attempts/2" {
		t.Errorf("RunURL() = %s", got)
	}
}

func TestStep(t *testing.T) {
	dir := wintest.TempDir(t)
	env := map[string]string{"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"), "GITHUB_OUTPUT": filepath.Join(dir, "output")}
	var console bytes.Buffer
	a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(&console))
	res := result(t, false)
	res.Assertions[0].Detail = "evil\n::set-output name=x::y \x1b[2J ##[add-mask]z 100%"
	Step(a, func(k string) string { return env[k] }, res, res.Run.Out, 99)
	summary, _ := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
	if !strings.Contains(string(summary), "npu serve smoke: FAIL") {
		t.Errorf("step summary = %.200s", summary)
	}
	outputs, _ := os.ReadFile(env["GITHUB_OUTPUT"])
	// Lines end as the runner's OS ends them ("\r\n" on Windows), and paths
	// are the OS's own.
	eol := githubactions.EOF
	for _, want := range []string{"result<<", eol + "fail" + eol, "rate<<", eol + "1.9" + eol, "route<<", eol + "slow" + eol, "check-run-id<<", eol + "99" + eol, "first-token-ms<<", eol + "250" + eol, "result-json<<", filepath.Join("/tmp/out", "result.json"), "summary-md<<"} {
		if !strings.Contains(string(outputs), want) {
			t.Errorf("GITHUB_OUTPUT lacks %q:\n%s", want, outputs)
		}
	}
	// go-githubactions escapes %, CR and LF; the rest (ESC, "##[") is
	// console.Text's.
	want := "::error title=npu serve smoke%3A route::evil\\n::set-output name=x::y \\x1b[2J ##\\[add-mask]z 100%25" + eol + "::error title=npu serve smoke%3A rate::" + res.Assertions[1].Detail + eol
	if diff := cmp.Diff(want, console.String()); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}

	// Outside a runner's files, nothing panics and nothing is written.
	console.Reset()
	Step(githubactions.New(githubactions.WithGetenv(func(string) string { return "" }), githubactions.WithWriter(&console)), func(string) string { return "" }, result(t, true), "/tmp/out", 0)
	if console.Len() != 0 {
		t.Errorf("a passing run outside a runner printed %q", console.String())
	}
}

func TestOutputsOfNothing(t *testing.T) {
	res := result(t, true)
	res.Replies = nil
	res.Route = route.Evidence{}
	res.Judged(judge.Judge(res.Input()))
	got := Outputs(res, "", 0)
	if got["rate"] != "" || got["first-token-ms"] != "" || got["check-run-id"] != "" || got["route"] != "neither" || got["result"] != "fail" || got["result-json"] != "" || got["summary-md"] != "" {
		t.Errorf("Outputs() of no replies = %v", got)
	}
	m := func(s string) *route.Match { return &route.Match{Text: s} }
	for want, ev := range map[string]route.Evidence{"both": {Fast: m("f"), Slow: m("s")}, "fast": {Fast: m("f")}, "slow": {Slow: m("s")}} {
		if got := report.RouteName(ev); got != want {
			t.Errorf("report.RouteName() = %s, want %s", got, want)
		}
	}
}

func TestRetryTransportErrors(t *testing.T) {
	calls := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		return nil, fmt.Errorf("connection reset")
	})
	var sleeps []time.Duration
	retry := Retry{Attempts: 3, Backoff: time.Second, MaxWait: time.Minute, Now: time.Now,
		Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }}
	c := &http.Client{Transport: retry.Transport(base)}
	c.Get("http://example.invalid/x")
	if calls != 3 || len(sleeps) != 2 {
		t.Errorf("GET after a network error: %d calls, waits %v; want 3 and 2", calls, sleeps)
	}
	calls, sleeps = 0, nil
	c.Post("http://example.invalid/x", "application/json", strings.NewReader("{}"))
	if calls != 1 || len(sleeps) != 0 {
		t.Errorf("POST after a network error: %d calls; want 1: it may have been delivered", calls)
	}
}

func TestRetryRateLimitReset(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tr := &retryTransport{r: Retry{Now: func() time.Time { return now }}}
	resp := &http.Response{Header: http.Header{}}
	resp.Header.Set("X-RateLimit-Remaining", "0")
	resp.Header.Set("X-RateLimit-Reset", fmt.Sprint(now.Add(42*time.Second).Unix()))
	if got := tr.named(resp, time.Second); got != 42*time.Second {
		t.Errorf("named() with a reset 42 s away = %v", got)
	}
	resp.Header.Set("X-RateLimit-Reset", fmt.Sprint(now.Add(-time.Second).Unix()))
	if got := tr.named(resp, time.Second); got != 0 {
		t.Errorf("named() with a reset past = %v, want 0", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCancelledConclusion(t *testing.T) {
	h := newHarness(t, Context{SHA: headSHA, Event: "push"})
	res := result(t, true)
	res.Verdict = report.Cancelled
	h.run(t, false, res)
	if cr := h.gh.CheckRuns()[0]; cr["conclusion"] != "cancelled" || cr["status"] != "completed" {
		t.Errorf("check run of a cancelled run = %v %v, want completed cancelled", cr["status"], cr["conclusion"])
	}
}

// A run's start and finish are what its result.json says, and a fork writes
// that file: the check run carries the publisher's own clock.
func TestCheckRunTimesAreThePublishers(t *testing.T) {
	claimedStart, claimedEnd := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2001, 1, 1, 0, 0, 5, 0, time.UTC)
	clock := []time.Time{time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 3, 0, 9, 0, time.UTC)}
	for _, started := range []bool{false, true} {
		h := newHarness(t, Context{SHA: headSHA, Event: "workflow_run"})
		p := h.publisher(t, false)
		tick := 0
		p.Now = func() time.Time { tick++; return clock[min(tick, len(clock))-1] }
		res := result(t, true)
		res.Run.Started, res.Run.Finished = claimedStart, claimedEnd
		// Created at the end: started when completed, by the clock.
		wantStart, wantEnd := clock[0], clock[0]
		if started {
			wantEnd = clock[1]
			// The gate's own run: Start is given its start by the caller.
			p.Start(context.Background(), clock[0])
			tick = 1
		}
		if id := p.Finish(context.Background(), res, "npu serve smoke: PASS"); id != 1 {
			t.Fatalf("Finish() = %d, want check run 1; notices %q", id, h.notices)
		}
		cr := h.gh.CheckRuns()[0]
		for field, want := range map[string]time.Time{"started_at": wantStart, "completed_at": wantEnd} {
			got, err := time.Parse(time.RFC3339, fmt.Sprint(cr[field]))
			if err != nil || !got.Equal(want) {
				t.Errorf("started %v: check run's %s = %v, want the publisher's clock %v, not the run's claim", started, field, cr[field], want)
			}
		}
		if s := cr["output"].(map[string]any)["text"].(string); !strings.Contains(s, "The run says it started 2001-01-01T00:00:00Z and finished 2001-01-01T00:00:05Z.") {
			t.Errorf("started %v: text lacks the run's claimed times: %.300s", started, s)
		}
	}
}

// The agreement output is the agreement assertion's state, empty without a
// reference.
func TestOutputsAgreement(t *testing.T) {
	res := result(t, true)
	if got := Outputs(res, "", 0)["agreement"]; got != "" {
		t.Errorf("Outputs()[agreement] without a reference = %q, want empty", got)
	}
	for _, ok := range []bool{true, false} {
		res.Assertions = append(res.Assertions[:len(res.Assertions):len(res.Assertions)], judge.Assertion{Name: judge.Agreement, OK: ok})
		want := map[bool]string{true: "ok", false: "fail"}[ok]
		if got := Outputs(res, "", 0)["agreement"]; got != want {
			t.Errorf("Outputs()[agreement] with the assertion ok=%v = %q, want %q", ok, got, want)
		}
	}
}

// The energy output is the gross joules per decoded token, what
// --max-joules-per-token judges; energy-net is the net figure beside it.
// Each is empty where the run has none.
func TestOutputsEnergy(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name           string
		e              *judge.Energy
		gross, netWant string
	}{
		{"no sensor", nil, "", ""},
		{"unavailable", &judge.Energy{Source: "auto", Why: "no energy source can be read here"}, "", ""},
		{"gross and net", &judge.Energy{GrossJPerToken: f(1.484), NetJPerToken: f(0.07407)}, "1.484", "0.07407"},
		{"gross alone (--energy-idle 0)", &judge.Energy{GrossJPerToken: f(2.5)}, "2.5", ""},
	} {
		res := result(t, true)
		res.Energy = c.e
		got := Outputs(res, "", 0)
		if got["energy"] != c.gross || got["energy-net"] != c.netWant {
			t.Errorf("%s: Outputs()[energy, energy-net] = %q, %q, want %q, %q", c.name, got["energy"], got["energy-net"], c.gross, c.netWant)
		}
	}
}
