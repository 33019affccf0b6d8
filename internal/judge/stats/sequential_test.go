package stats

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestCountText: how a count ends the rate's and first token's details.
func TestCountText(t *testing.T) {
	for _, tt := range []struct {
		c    Count
		want string
	}{
		{NewCount(3, 0, 3), "signs: 3 meet the floor, 0 miss it: decided, a lead of 3 for meeting it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)"},
		{NewCount(0, 4, 3), "signs: 0 meet the floor, 4 miss it: decided, a lead of 4 for missing it, --lead 3 (likelihood ratio 3^4 = 81 against 1/alpha = 20)"},
		{NewCount(3, 2, 3), "close to the floor: 3 meet it, 2 miss it, a lead of 1, short of --lead 3 (likelihood ratio 3^1 = 3 against 1/alpha = 20): the median decides"},
		{NewCount(1, 2, 3), "close to the floor: 1 meet it, 2 miss it, a lead of 1, short of --lead 3 (likelihood ratio 3^1 = 3 against 1/alpha = 20): the median decides"},
	} {
		if got := tt.c.Text("the floor"); got != tt.want {
			t.Errorf("%+v.Text() = %q, want %q", tt.c, got, tt.want)
		}
	}
	// Close to the floor whenever the median's interval holds it: k
	// replies or more on each side (k = 1 up to 8 replies, 2 at 9, 4 at
	// 15), decided or not.
	for _, tt := range []struct {
		c    Count
		want string
	}{
		{NewCount(4, 1, 3), "close to the floor: 4 meet it, 1 miss it, the median's interval holds it (1 or more on each side of 5 replies); decided all the same, a lead of 3 for meeting it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)"},
		{NewCount(7, 2, 3), "close to the floor: 7 meet it, 2 miss it, the median's interval holds it (2 or more on each side of 9 replies); decided all the same, a lead of 5 for meeting it, --lead 3 (likelihood ratio 3^5 = 243 against 1/alpha = 20)"},
		{NewCount(8, 1, 3), "signs: 8 meet the floor, 1 miss it: decided, a lead of 7 for meeting it, --lead 3 (likelihood ratio 3^7 = 2187 against 1/alpha = 20)"},
		{NewCount(4, 11, 3), "close to the floor: 4 meet it, 11 miss it, the median's interval holds it (4 or more on each side of 15 replies); decided all the same, a lead of 7 for missing it, --lead 3 (likelihood ratio 3^7 = 2187 against 1/alpha = 20)"},
		{NewCount(3, 12, 3), "signs: 3 meet the floor, 12 miss it: decided, a lead of 9 for missing it, --lead 3 (likelihood ratio 3^9 = 19683 against 1/alpha = 20)"},
		{NewCount(13, 2, 12), "signs: 13 meet the floor, 2 miss it, a lead of 11, short of --lead 12 (likelihood ratio 3^11 = 177147 against 1/alpha = 20), clear of it all the same (the median's interval does not hold it): the median decides"},
	} {
		if got := tt.c.Text("the floor"); got != tt.want {
			t.Errorf("%+v.Text() = %q, want %q", tt.c, got, tt.want)
		}
	}
	// Fewer replies than the lead cannot decide whatever their signs: no
	// "close to" a floor all of them met. As many as the lead can.
	if got := NewCount(2, 0, 3).Text("the floor"); got != "undecided: 2 meet the floor, 0 miss it, too few replies (2) to reach --lead 3 (likelihood ratio 3^2 = 9 against 1/alpha = 20): the median decides" {
		t.Errorf("NewCount(2, 0, 3).Text() = %q", got)
	}
	if got := NewCount(2, 1, 3).Text("the floor"); !strings.HasPrefix(got, "close to the floor: 2 meet it, 1 miss it") {
		t.Errorf("NewCount(2, 1, 3).Text() = %q", got)
	}
	// A long run's ratio is beyond a float64: the count keeps the largest
	// float64 (result.json holds no infinity) and the text its power of
	// ten, exact up to a lead of 30.
	if c := NewCount(650, 0, 3); c.Ratio != math.MaxFloat64 || !c.Decided {
		t.Errorf("NewCount(650, 0, 3) = %+v, want the largest float64", c)
	}
	if _, err := json.Marshal(NewCount(0, 700, 3)); err != nil {
		t.Errorf("json.Marshal(a lead of 700): %v", err)
	}
	if r := Ratio(-646); math.IsInf(r, 0) || r < 1e308 {
		t.Errorf("Ratio(-646) = %v", r)
	}
	for d, want := range map[int]string{30: "3^30 = 205891132094649 ", -31: "3^31 ≈ 10^15 ", 650: "3^650 ≈ 10^310 "} {
		meet, miss := max(d, 0), max(-d, 0)
		if got := NewCount(meet, miss, 3).Text("the floor"); !strings.Contains(got, "likelihood ratio "+want+"against 1/alpha = 20)") {
			t.Errorf("Text(lead %d) = %q, want %q", d, got, want)
		}
	}
	// A count at a lead of 0 is decided at once, for meeting when even,
	// and close when split.
	if got := NewCount(2, 2, 0).Text("the floor"); got != "close to the floor: 2 meet it, 2 miss it, the median's interval holds it (1 or more on each side of 4 replies); decided all the same, a lead of 0 for meeting it, --lead 0 (likelihood ratio 3^0 = 1 against 1/alpha = 20)" {
		t.Errorf("NewCount(2, 2, 0).Text() = %q", got)
	}
}

// A count is close when k figures or more lie on each side of the limit,
// k the median interval's (IntervalK): exactly at k, and one short.
func TestCountClose(t *testing.T) {
	for _, tt := range []struct {
		meet, miss int
		want       bool
	}{
		{0, 0, false}, {1, 0, false}, {0, 1, false}, {1, 1, true}, {3, 0, false}, {2, 1, true},
		{7, 2, true}, {2, 7, true}, {8, 1, false}, {1, 8, false},
		{11, 4, true}, {12, 3, false}, {4, 11, true}, {3, 12, false},
	} {
		if got := NewCount(tt.meet, tt.miss, 3).Close(); got != tt.want {
			t.Errorf("NewCount(%d, %d, 3).Close() = %v, want %v", tt.meet, tt.miss, got, tt.want)
		}
	}
}

func TestCountOf(t *testing.T) {
	atLeast60 := func(v float64) bool { return v >= 60 }
	for _, tt := range []struct {
		xs   []float64
		lead int
		want Count
	}{
		{nil, 3, NewCount(0, 0, 3)},
		{[]float64{60, 59, 90, 100}, 3, NewCount(3, 1, 3)},
		{[]float64{10, 20, 30}, 2, NewCount(0, 3, 2)},
	} {
		if got := CountOf(tt.xs, atLeast60, tt.lead); got != tt.want {
			t.Errorf("CountOf(%v, at least 60, lead %d) = %+v, want %+v", tt.xs, tt.lead, got, tt.want)
		}
	}
}
