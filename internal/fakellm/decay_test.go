package fakellm_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
)

// A throttling device's rate falls from --rate toward TO with a time
// constant of TAU requests, warm-ups included.
func TestDecay(t *testing.T) {
	d := fakellm.Decay{To: 57, Tau: 5}
	for n, want := range map[int]float64{1: 66, 6: 57 + 9*math.Exp(-1), 11: 57 + 9*math.Exp(-2)} {
		if got := d.Of(66, n); math.Abs(got-want) > 1e-12 {
			t.Errorf("Decay{57, 5}.Of(66, %d) = %v, want %v", n, got, want)
		}
	}
	if got := (fakellm.Decay{}).Of(66, 9); got != 66 {
		t.Errorf("no decay: Of(66, 9) = %v, want 66", got)
	}
	// The serve's own figures say the rate each request was served at.
	rs := ask(t, fakellm.Options{Rates: []float64{66}, Instant: true, Decay: d}, 0, 6)
	for i, r := range rs {
		want := d.Of(66, i+1)
		if got, why := r.ServerRate(); why != "" || math.Abs(got-want) > 0.01 {
			t.Errorf("reply %d: the serve's rate %v (%s), want %v", i+1, got, why, want)
		}
	}
}

func TestDecayFlag(t *testing.T) {
	for _, bad := range []string{"57", "x,5", "57,x", "-1,5", "57,0", "57,-2", "57,Inf", "Inf,5", "NaN,5"} {
		var stdout, stderr bytes.Buffer
		if code := fakellm.Command([]string{"--rate-decay", bad}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--rate-decay") {
			t.Errorf("fakellm --rate-decay %s = %d, %q; want 2 naming the flag", bad, code, stderr.String())
		}
	}
}
