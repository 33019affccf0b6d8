package judge

import (
	"strings"
	"testing"
)

// The floor's reason: said when the rate fails, and always for a floor
// derived from a baseline.
func TestFloorWhy(t *testing.T) {
	rs := replies([]float64{70, 70, 70}, []float64{250, 250, 250})
	tests := []struct {
		name    string
		l       Limits
		wantWhy bool
	}{
		{"the default floor, passed: not said", Limits{Floor: 60, FirstTokenMS: 600, FloorWhy: "why 60"}, false},
		{"the default floor, failed: said", Limits{Floor: 80, FirstTokenMS: 600, FloorWhy: "why 60"}, true},
		{"a derived floor, passed: said", Limits{Floor: 60, FirstTokenMS: 600, FloorWhy: "why 60", FloorDerived: true}, true},
		{"a typed floor, failed: nothing to say", Limits{Floor: 80, FirstTokenMS: 600}, false},
	}
	for _, tt := range tests {
		a := judgeRate(rs, tt.l)
		if !strings.HasPrefix(a.Detail, "median 70.0 tok/s (floor ") {
			t.Errorf("%s: judgeRate() = %q, want the median first", tt.name, a.Detail)
		}
		if got := strings.HasSuffix(a.Detail, "; the floor: why 60"); got != tt.wantWhy {
			t.Errorf("%s: judgeRate() = %q, want the reason %v", tt.name, a.Detail, tt.wantWhy)
		}
	}
}
