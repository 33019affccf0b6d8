// Package publish reports a run where people look on GitHub: the job
// summary, step outputs and annotations, a check run with a stable name, and
// a sticky pull request comment. Posting never changes the verdict: GitHub's
// failures are reported, retried within a bound, or skipped with a notice.
package publish

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// Context is the GitHub Actions context of a run, from the environment and
// the event payload.
type Context struct {
	APIURL    string // GITHUB_API_URL (GHES too); default https://api.github.com
	ServerURL string // GITHUB_SERVER_URL
	Owner     string
	Repo      string
	SHA       string // the commit to report on: the PR head for pull requests
	Ref       string
	Event     string // GITHUB_EVENT_NAME
	PR        int    // the pull request, 0 when there is none
	Fork      bool   // the pull request comes from another repository
	// EvidenceFrom names the repository whose run produced the evidence,
	// when that is not this repository: a workflow_run job posting a fork's
	// run. Its artifact was written by code this repository did not review.
	EvidenceFrom string
	// EvidenceRunURL links the run a workflow_run event reports on, as
	// GitHub gives it: the run whose artifact is posted.
	EvidenceRunURL string
	RunID          string
	RunAttempt     string
	Runner         string
}

// FromEnv reads the context of the Actions run the process is in.
func FromEnv(getenv func(string) string) (*Context, error) {
	c := &Context{
		APIURL:     strings.TrimSuffix(getenv("GITHUB_API_URL"), "/"),
		ServerURL:  strings.TrimSuffix(getenv("GITHUB_SERVER_URL"), "/"),
		SHA:        getenv("GITHUB_SHA"),
		Ref:        getenv("GITHUB_REF"),
		Event:      getenv("GITHUB_EVENT_NAME"),
		RunID:      getenv("GITHUB_RUN_ID"),
		RunAttempt: getenv("GITHUB_RUN_ATTEMPT"),
		Runner:     getenv("RUNNER_NAME"),
	}
	if c.APIURL == "" {
		c.APIURL = "https://api.github.com"
	}
	if c.ServerURL == "" {
		c.ServerURL = "https://github.com"
	}
	owner, repo, ok := strings.Cut(getenv("GITHUB_REPOSITORY"), "/")
	if !ok || owner == "" || repo == "" {
		return nil, fmt.Errorf("GITHUB_REPOSITORY %q is not owner/repo", getenv("GITHUB_REPOSITORY"))
	}
	c.Owner, c.Repo = owner, repo
	if path := getenv("GITHUB_EVENT_PATH"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("GITHUB_EVENT_PATH: %v", err)
		}
		if err := c.readEvent(b); err != nil {
			return nil, fmt.Errorf("GITHUB_EVENT_PATH %s: %v", path, err)
		}
	}
	return c, nil
}

// event is the part of an event payload the gate reads.
type event struct {
	Number      int `json:"number"`
	PullRequest *struct {
		Number int `json:"number"`
		Head   struct {
			SHA  string `json:"sha"`
			Repo *struct {
				FullName string `json:"full_name"`
			} `json:"repo"`
		} `json:"head"`
		Base struct {
			Repo *struct {
				FullName string `json:"full_name"`
			} `json:"repo"`
		} `json:"base"`
	} `json:"pull_request"`
	WorkflowRun *struct {
		HeadSHA      string `json:"head_sha"`
		HTMLURL      string `json:"html_url"`
		PullRequests []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
		HeadRepository *struct {
			FullName string `json:"full_name"`
		} `json:"head_repository"`
		Repository *struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	} `json:"workflow_run"`
}

func (c *Context) readEvent(b []byte) error {
	var e event
	if err := json.Unmarshal(b, &e); err != nil {
		return fmt.Errorf("not an event payload: %v", err)
	}
	if pr := e.PullRequest; pr != nil {
		// A pull_request run's GITHUB_SHA is the merge commit; the check
		// belongs on the head the author pushed.
		c.PR = pr.Number
		if pr.Head.SHA != "" {
			c.SHA = pr.Head.SHA
		}
		if pr.Head.Repo == nil || pr.Base.Repo == nil || pr.Head.Repo.FullName != pr.Base.Repo.FullName {
			c.Fork = true
		}
	}
	if wr := e.WorkflowRun; wr != nil {
		c.SHA = wr.HeadSHA
		if len(wr.PullRequests) > 0 {
			c.PR = wr.PullRequests[0].Number
		}
		c.EvidenceFrom = evidenceFrom(c.Owner+"/"+c.Repo, wr.Repository, wr.HeadRepository)
		c.EvidenceRunURL = wr.HTMLURL
	}
	return nil
}

// evidenceFrom is the repository that ran a workflow_run's code when it is
// not the base repository, "" when it is the base. An event that does not
// name both is taken as coming from elsewhere.
func evidenceFrom(self string, base, head *struct {
	FullName string `json:"full_name"`
}) string {
	if base != nil && base.FullName != "" {
		self = base.FullName
	}
	switch {
	case head == nil || head.FullName == "":
		return "a repository the event does not name"
	case !strings.EqualFold(head.FullName, self): // GitHub's names ignore case
		return head.FullName
	}
	return ""
}

// RunURL is the link to the workflow run.
func (c *Context) RunURL() string {
	if c.RunID == "" {
		return ""
	}
	u := fmt.Sprintf("%s/%s/%s/actions/runs/%s", c.ServerURL, c.Owner, c.Repo, c.RunID)
	if c.RunAttempt != "" && c.RunAttempt != "1" {
		u += "/attempts/" + c.RunAttempt
	}
	return u
}

// Facts are the context as result.json records it.
func (c *Context) Facts() *report.GitHubFacts {
	return &report.GitHubFacts{
		Repository: c.Owner + "/" + c.Repo, SHA: c.SHA, Ref: c.Ref, Event: c.Event,
		PR: c.PR, RunURL: c.RunURL(), Runner: c.Runner,
	}
}
