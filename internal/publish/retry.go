package publish

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retry is how GitHub's transient failures are retried: 5xx, 429, and the
// secondary rate limit (403 with Retry-After or with that message). Waits
// honour Retry-After and X-RateLimit-Reset; one that would be longer than
// MaxWait is not taken, and the failure is reported instead.
type Retry struct {
	Attempts int           // tries in all, the first included
	Backoff  time.Duration // the first wait when GitHub names none; doubled each time
	MaxWait  time.Duration // the longest single wait taken
	// Sleep waits for d or until ctx ends; tests record the waits instead.
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
}

// DefaultRetry is the bound the gate uses: four tries over at most a few
// minutes.
func DefaultRetry() Retry {
	return Retry{Attempts: 4, Backoff: time.Second, MaxWait: 60 * time.Second, Sleep: sleep, Now: time.Now}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Transport wraps base with the retries.
func (r Retry) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &retryTransport{r: r, base: base}
}

type retryTransport struct {
	r    Retry
	base http.RoundTripper
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	backoff := t.r.Backoff
	for attempt := 1; ; attempt++ {
		if attempt > 1 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
		resp, err := t.base.RoundTrip(req)
		wait, retry := t.wait(req, resp, err, backoff)
		if !retry || attempt >= t.r.Attempts || wait > t.r.MaxWait {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if serr := t.r.Sleep(req.Context(), wait); serr != nil {
			return nil, serr
		}
		backoff *= 2
	}
}

// wait says whether a response is worth another try, and after how long.
func (t *retryTransport) wait(req *http.Request, resp *http.Response, err error, backoff time.Duration) (time.Duration, bool) {
	if err != nil {
		// A connection that failed may have delivered a POST already:
		// only requests that are safe to repeat are repeated.
		return backoff, req.Method != http.MethodPost && req.Context().Err() == nil
	}
	switch {
	case resp.StatusCode >= 500:
		return t.named(resp, backoff), true
	case resp.StatusCode == http.StatusTooManyRequests:
		return t.named(resp, backoff), true
	case resp.StatusCode == http.StatusForbidden && secondaryLimit(resp):
		return t.named(resp, time.Minute), true // GitHub: wait a minute when it names no time
	}
	return 0, false
}

// named is the wait GitHub asks for, else fallback.
func (t *retryTransport) named(resp *http.Response, fallback time.Duration) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			if d := time.Unix(reset, 0).Sub(t.r.Now()); d > 0 {
				return d
			}
			return 0
		}
	}
	return fallback
}

// secondaryLimit reports whether a 403 is GitHub's rate limiting rather than
// a missing permission. The body is read and put back.
func secondaryLimit(resp *http.Response) bool {
	if resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0" {
		return true
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return strings.Contains(strings.ToLower(string(b)), "rate limit")
}
