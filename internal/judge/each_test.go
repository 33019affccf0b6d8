package judge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// A run's replies are read back from its directory (up to 65,536 of them,
// report.MaxReplies), which anyone may edit: every list a detail makes of
// them names at most maxEach entries and counts the rest.
func TestDetailListsBounded(t *testing.T) {
	many := func(n int, f func(r *measure.Reply)) []measure.Reply {
		rates, first := make([]float64, n), make([]float64, n)
		for i := range n {
			rates[i], first[i] = 90, 250
		}
		rs := replies(rates, first)
		for i := range rs {
			f(&rs[i])
		}
		return rs
	}
	noRate := func(r *measure.Reply) { r.FirstMS, r.LastMS, r.Content = nil, nil, "" }
	for _, tc := range []struct {
		name   string
		in     []measure.Reply
		want   []string // in the details, by assertion
		not    string   // in no detail
		within int      // bytes every detail stays within
	}{
		{"as many as named", many(maxEach, func(*measure.Reply) {}), []string{
			"each: " + strings.TrimSuffix(strings.Repeat("90.0, ", maxEach), ", ") + "; the serve's own: ",
			"each: " + strings.TrimSuffix(strings.Repeat("250, ", maxEach), ", ") + ")",
		}, "more", 4000},
		{"one past", many(maxEach+1, func(*measure.Reply) {}), []string{
			"each: " + strings.Repeat("90.0, ", maxEach) + "1 more; the serve's own: " + strings.Repeat("94.5, ", maxEach) + "1 more)",
			"each: " + strings.Repeat("250, ", maxEach) + "1 more)",
		}, "", 4000},
		{"every reply failed, padded", many(41207, noRate), []string{
			"reply 64 has no rate (no content arrived); 41143 more (floor 60.0; each: " + strings.Repeat("-, ", maxEach) + "41143 more; the serve's own: " + strings.Repeat("94.5, ", maxEach) + "41143 more)",
			"reply 64 has no first token; 41143 more (limit 600; each: ",
			"41207 of 41207 replies fail: reply 1 has no content; ", "reply 64 has no content; 41143 more",
		}, "reply 65 ", 12000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(Input{Route: evidence(t, fastLine), Replies: tc.in, Limits: limits})
			var all []string
			for _, a := range v.Assertions {
				all = append(all, a.Detail)
				if len(a.Detail) > tc.within {
					t.Errorf("%s detail of %d bytes: %.300q...", a.Name, len(a.Detail), a.Detail)
				}
			}
			details := strings.Join(all, "\n")
			for _, w := range tc.want {
				if !strings.Contains(details, w) {
					t.Errorf("details %.3000q\nwant them to hold %q", details, w)
				}
			}
			if tc.not != "" && strings.Contains(details, tc.not) {
				t.Errorf("details hold %q", tc.not)
			}
		})
	}
}

func TestJoinEach(t *testing.T) {
	xs := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, ""},
		{1, "0"},
		{maxEach, strings.Join(xs(maxEach), "; ")},
		{maxEach + 1, strings.Join(xs(maxEach), "; ") + "; 1 more"},
		{maxEach + 41203, strings.Join(xs(maxEach), "; ") + "; 41203 more"},
	} {
		if got := joinEach(xs(tc.n), "; "); got != tc.want {
			t.Errorf("joinEach of %d: %q, want %q", tc.n, got, tc.want)
		}
	}
}
