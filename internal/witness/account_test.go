package witness

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

func TestOllamaPS(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   judge.Account
	}{
		{"all on the device", 200, `{"models":[{"name":"other:latest","size":5,"size_vram":5},{"name":"tiny:latest","model":"tiny:latest","size":1000,"size_vram":1000}]}`,
			judge.Account{Source: "GET /api/ps", Text: "tiny:latest: size 1000, size_vram 1000", Route: judge.RouteFast, Why: "all of the model in device memory"}},
		{"none on the device", 200, `{"models":[{"name":"x","size":1000,"size_vram":0}]}`,
			judge.Account{Source: "GET /api/ps", Text: "x: size 1000, size_vram 0", Route: judge.RouteSlow, Why: "none of the model in device memory"}},
		{"part on the device", 200, `{"models":[{"name":"tiny","size":1000,"size_vram":250}]}`,
			judge.Account{Source: "GET /api/ps", Text: "tiny: size 1000, size_vram 250", Route: judge.RouteSlow, Why: "part of the model in device memory (25%)"}},
		{"sizes that say nothing", 200, `{"models":[{"name":"tiny","size":0,"size_vram":0}]}`,
			judge.Account{Source: "GET /api/ps", Text: "tiny: size 0, size_vram 0", Why: "sizes that say nothing"}},
		{"no such model among two", 200, `{"models":[{"name":"a","size":1,"size_vram":1},{"name":"b","size":1,"size_vram":1}]}`,
			judge.Account{Source: "GET /api/ps", Why: `names no loaded model "tiny" (2 loaded)`}},
		{"not JSON", 200, `<html>`, judge.Account{Source: "GET /api/ps", Text: "<html>", Why: "not read: invalid character '<' looking for beginning of value"}},
		{"an error", 404, `404 page not found`, judge.Account{Source: "GET /api/ps", Text: "404 page not found", Why: "not read: HTTP 404"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/ps" {
					t.Errorf("asked %s", r.URL.Path)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			got := Ask(context.Background(), srv.Client(), srv.URL, AccountOllama, "tiny")
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("Ask (-want +got):\n%s", diff)
			}
		})
	}
	if got := Ask(context.Background(), http.DefaultClient, "http://127.0.0.1:1", "", "tiny"); got != nil {
		t.Errorf("Ask of a serve with no account = %v, want nil", got)
	}
}
