package stats

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMedianInterval(t *testing.T) {
	seq := func(n int) []float64 {
		var xs []float64
		for i := n; i >= 1; i-- { // unsorted on purpose
			xs = append(xs, float64(i))
		}
		return xs
	}
	tests := []struct {
		in   []float64
		want Interval
	}{
		{seq(1), Interval{N: 1, Median: 1, Lo: 1, Hi: 1, Coverage: 0}},
		{seq(5), Interval{N: 5, Median: 3, Lo: 1, Hi: 5, Coverage: 0.9375}},
		{seq(6), Interval{N: 6, Median: 3.5, Lo: 1, Hi: 6, Coverage: 0.96875}},
		{seq(8), Interval{N: 8, Median: 4.5, Lo: 1, Hi: 8, Coverage: 1 - 2.0/256}},
		{seq(9), Interval{N: 9, Median: 5, Lo: 2, Hi: 8, Coverage: 1 - 20.0/512}},
		{seq(15), Interval{N: 15, Median: 8, Lo: 4, Hi: 12, Coverage: 1 - 2*576.0/32768}},
		{[]float64{98.4, 84.4, 82.1, 90.0, 85.2}, Interval{N: 5, Median: 85.2, Lo: 82.1, Hi: 98.4, Coverage: 0.9375}},
	}
	for _, tt := range tests {
		got, ok := MedianInterval(tt.in)
		if !ok {
			t.Errorf("MedianInterval(%v) not ok", tt.in)
		}
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })); diff != "" {
			t.Errorf("MedianInterval(%v) (-want +got):\n%s", tt.in, diff)
		}
	}
	if _, ok := MedianInterval(nil); ok {
		t.Error("MedianInterval(nil) is ok")
	}
	// A level met exactly is met: nine figures reach 1-20/512 with k=2.
	if iv, _ := MedianIntervalAt(seq(9), 1-20.0/512); iv.Lo != 2 || iv.Hi != 8 {
		t.Errorf("MedianIntervalAt(n=9, its own k=2 coverage) = %+v, want [2, 8]", iv)
	}
	// The coverage never falls below the level once there are six figures.
	for n := 6; n <= 60; n++ {
		if iv, _ := MedianInterval(seq(n)); iv.Coverage < Level || iv.Lo > iv.Hi {
			t.Errorf("MedianInterval(n=%d) = %+v: coverage under %.2f", n, iv, Level)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{70, 70, 1.9}, 70},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if diff := cmp.Diff(in, tt.in); diff != "" {
			t.Errorf("Median changed its input (-before +after):\n%s", diff)
		}
	}
}

func TestNewCount(t *testing.T) {
	tests := []struct {
		meet, miss, lead int
		want             Count
	}{
		{0, 0, 3, Count{Lead: 3, Ratio: 1}},
		{3, 0, 3, Count{Meet: 3, Lead: 3, Ratio: 27, Decided: true}},
		{0, 3, 3, Count{Miss: 3, Lead: 3, Ratio: 27, Decided: true}},
		{4, 2, 3, Count{Meet: 4, Miss: 2, Lead: 3, Ratio: 9}},
		{2, 4, 3, Count{Meet: 2, Miss: 4, Lead: 3, Ratio: 9}},
		{5, 1, 4, Count{Meet: 5, Miss: 1, Lead: 4, Ratio: 81, Decided: true}},
		{1, 6, 4, Count{Meet: 1, Miss: 6, Lead: 4, Ratio: 243, Decided: true}},
		{3, 0, 4, Count{Meet: 3, Lead: 4, Ratio: 27}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, NewCount(tt.meet, tt.miss, tt.lead), cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
			t.Errorf("NewCount(%d, %d, %d) (-want +got):\n%s", tt.meet, tt.miss, tt.lead, diff)
		}
	}
}

func TestP95(t *testing.T) {
	if P95(nil) != 0 {
		t.Error("p95 of nothing")
	}
	var xs []float64
	for i := range 20 {
		xs = append(xs, float64(20-i))
	}
	// Nearest rank: the 19th of 20.
	if got := P95(xs); got != 19 {
		t.Errorf("p95 %v, want 19", got)
	}
	if got := P95([]float64{3}); got != 3 {
		t.Errorf("p95 %v, want 3", got)
	}
}
