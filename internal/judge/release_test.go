package judge

import (
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

func TestJudgeRelease(t *testing.T) {
	fast := route.Evidence{Fast: &route.Match{Text: "on the private route", Line: 1}}
	for _, tt := range []struct {
		name string
		r    Release
		want []string // in the release detail; none: no release assertion
	}{
		{"clean", Release{}, nil},
		{"survivors", Release{Survivors: 2, Left: []string{"12 sleep 600", "13 sh -c \x1b[2Jx"}}, []string{
			`2 process(es) of the serve survived its stop ("12 sleep 600", "13 sh -c \x1b[2Jx"): the device is not free of this run, and the next run's figures on it are suspect`,
		}},
		{"survivors unnamed", Release{Survivors: 1}, []string{"1 process(es) of the serve survived its stop: the device"}},
		{"lost", Release{Lost: "the ticket npu.h.1 was not locked any more"}, []string{
			`the gate could not confirm that it held the device's ticket to the end ("the ticket npu.h.1 was not locked any more"): another run may have had the device while this one measured`,
		}},
		{"stopped", Release{Stopped: 3}, []string{"the serve's supervisor was found stopped (SIGSTOP) 3 time(s) at the serve's stop, and continued"}},
		// serve.left is read back from result.json, which anyone may edit:
		// a detail names at most maxLeft of them, and counts the rest.
		{"as many survivors as named", Release{Survivors: 8, Left: strings.Fields("1 2 3 4 5 6 7 8")}, []string{
			`survived its stop ("1", "2", "3", "4", "5", "6", "7", "8"): the device`,
		}},
		{"survivors past those named", Release{Survivors: 41211, Left: strings.Fields(strings.Repeat("x ", 41211))}, []string{
			`survived its stop ("x", "x", "x", "x", "x", "x", "x", "x", 41203 more): the device`,
		}},
		{"all", Release{Survivors: 1, Left: []string{"9 x"}, Lost: "gone", Stopped: 1}, []string{`survived its stop ("9 x")`, `ticket to the end ("gone")`, "found stopped (SIGSTOP) 1 time(s)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Route: fast, Replies: replies([]float64{90, 90, 90}, []float64{250, 250, 250}), Limits: Limits{Floor: 60, FirstTokenMS: 600}, Release: tt.r}
			v := Judge(in)
			var rel *Assertion
			for i := range v.Assertions {
				if v.Assertions[i].Name == Released {
					rel = &v.Assertions[i]
				}
			}
			if tt.want == nil {
				if rel != nil || !v.Pass {
					t.Errorf("Judge(%+v) = %+v, want a pass with no release assertion", tt.r, v)
				}
				return
			}
			if rel == nil || rel.OK || v.Pass {
				t.Fatalf("Judge(%+v) = %+v, want a fail with a failed release assertion", tt.r, v)
			}
			for _, w := range tt.want {
				if !strings.Contains(rel.Detail, w) {
					t.Errorf("release detail = %q, want it to hold %q", rel.Detail, w)
				}
			}
		})
	}
	// No replies at all: the release is judged all the same.
	v := Judge(Input{NoReplies: "never ready", Release: Release{Survivors: 1}})
	if last := v.Assertions[len(v.Assertions)-1]; last.Name != Released || last.OK {
		t.Errorf("Judge(no replies, a survivor) = %+v, want the release assertion last, failed", v.Assertions)
	}
}
