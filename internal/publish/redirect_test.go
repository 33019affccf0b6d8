package publish

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v60/github"
)

// TestNoTokenToAnotherHost: the client adds the token to every request it
// sends, redirected ones too, so a redirect of the API to another host is
// not followed (the other host never sees the token), while one on the
// API's own host (GitHub's 301 for a renamed repository) is.
func TestNoTokenToAnotherHost(t *testing.T) {
	var mu sync.Mutex
	var got []string // the Authorization headers the other host received
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(`{"id": 7}`))
	}))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/repos/o/old/check-runs":
			http.Redirect(w, r, "/repos/o/r/check-runs", http.StatusTemporaryRedirect)
		case "/repos/o/r/check-runs":
			if r.Header.Get("Authorization") != "Bearer ghs_secret" {
				t.Errorf("the API's own host got Authorization %q", r.Header.Get("Authorization"))
			}
			w.Write([]byte(`{"id": 8}`))
		default:
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}
	}))
	defer api.Close()

	client, err := NewClient(&Context{APIURL: api.URL}, "ghs_secret", Retry{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := github.CreateCheckRunOptions{Name: "npu serve smoke", HeadSHA: "abc"}
	_, _, err = client.Checks.CreateCheckRun(context.Background(), "o", "x", opts)
	if err == nil || !strings.Contains(err.Error(), "redirected to another host") {
		t.Errorf("CreateCheckRun through a redirect to another host: err = %v, want it refused", err)
	}
	mu.Lock()
	if len(got) != 0 {
		t.Errorf("the other host received %d request(s), Authorization %q; want none", len(got), got)
	}
	mu.Unlock()
	run, _, err := client.Checks.CreateCheckRun(context.Background(), "o", "old", opts)
	if err != nil || run.GetID() != 8 {
		t.Errorf("CreateCheckRun through a redirect on the API's own host = %v, %v; want the run 8", run, err)
	}
}
