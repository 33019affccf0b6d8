package judge

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// docs/measuring.md's table of what the rule says inside the zone, between
// these markers.
const (
	zoneStart = "<!-- zone-table: made by go test ./internal/judge -run TestZoneTable -update -->\n"
	zoneEnd   = "<!-- /zone-table -->\n"
)

// zone is what the rule says at p, exactly (dynamic programming over the
// signs, as Operating): how often the run ends with "close to the floor",
// before (only when the lead did not decide) and now (whenever the
// median's interval holds the floor, Count.Close), and how often the
// verdict is on the wrong side of p = ½ (a pass below it, a fail above,
// a tie counted wrong) with nothing said, before and now.
type zone struct {
	closeBefore, closeNow, wrong, silentBefore, silentNow float64
}

func zoneAt(r Rule, p float64) zone {
	var z zone
	live := []float64{1}
	for n := 0; n <= r.Max; n++ {
		next := make([]float64, n+2)
		for m, q := range live {
			if !r.Stops(m, n-m) {
				next[m] += q * (1 - p)
				next[m+1] = q * p
				continue
			}
			c := stats.NewCount(m, n-m, r.Lead)
			before := !c.Decided && n >= r.Lead
			wrong := p < 0.5 && 2*m >= n || p > 0.5 && 2*m <= n
			if before {
				z.closeBefore += q
			}
			if c.Close() {
				z.closeNow += q
			}
			if wrong {
				z.wrong += q
				if !before {
					z.silentBefore += q
				}
				if !c.Close() {
					z.silentNow += q
				}
			}
		}
		live = next
	}
	return z
}

func zoneTable() string {
	var b strings.Builder
	b.WriteString("| p | wrong verdict | said close: before | said close: now | wrong, not said close: before | wrong, not said close: now |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	r := Rule{Lead: stats.DefaultLead, Min: 1, Max: 15}
	for _, p := range []float64{0.1, 0.25, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.75, 0.9} {
		z := zoneAt(r, p)
		wrong := fmt.Sprintf("%.1f%%", z.wrong*100)
		if p == 0.5 {
			wrong = "(either)"
			z.silentBefore, z.silentNow = math.NaN(), math.NaN()
		}
		fmt.Fprintf(&b, "| %.2f | %s | %.1f%% | %.1f%% | %s | %s |\n", p, wrong, z.closeBefore*100, z.closeNow*100, pctOrDash(z.silentBefore), pctOrDash(z.silentNow))
	}
	return b.String()
}

func pctOrDash(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", v*100)
}

func TestZoneTable(t *testing.T) {
	pinned(t, "../../docs/measuring.md", zoneStart, zoneEnd, zoneTable(), "go test ./internal/judge -run TestZoneTable")
}

// Inside the zone the report says "close to the floor" in most runs; a
// wrong verdict is said close but when three replies in a row went the
// wrong way (p³ at p = 0.45: 9.1%).
func TestZoneSaysClose(t *testing.T) {
	r := Rule{Lead: stats.DefaultLead, Min: 1, Max: 15}
	for _, p := range []float64{0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7} {
		if z := zoneAt(r, p); z.closeNow < 0.5 {
			t.Errorf("at p = %v the report says close in %.1f%% of runs, want most", p, z.closeNow*100)
		}
	}
	for _, p := range []float64{0.4, 0.45} {
		if z, want := zoneAt(r, p), p*p*p; math.Abs(z.silentNow-want) > 1e-12 {
			t.Errorf("at p = %v a wrong verdict not said close: %v, want p³ = %v", p, z.silentNow, want)
		}
	}
}
