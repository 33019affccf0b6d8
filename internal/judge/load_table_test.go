package judge

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// docs/measuring.md's table of rounds to a load verdict, between these
// markers.
const (
	loadTableStart = "<!-- load-rounds-table: made by go test ./internal/judge -run TestLoadRoundsTable -update -->\n"
	loadTableEnd   = "<!-- /load-rounds-table -->\n"
)

// loadRoundsTable is the rounds a load count takes to decide at its
// defaults (--lead 3, at most 11 rounds), and the chance the median round
// passes, exact, at p (the chance a round meets the floor) and 1 - p.
func loadRoundsTable() string {
	var b strings.Builder
	b.WriteString("| p | rounds | median passes |\n|---:|---:|---:|\n")
	rule := Rule{Lead: stats.DefaultLead, Min: 1, Max: 11}
	for _, p := range []float64{1, 0.95, 0.84, 0.75, 0.6} {
		pass, _, rounds := Operating(rule, rule.Max, p)
		low, _, _ := Operating(rule, rule.Max, 1-p)
		fmt.Fprintf(&b, "| %.2f or %.2f | %.2f | %.2f%% or %.2f%% |\n", p, 1-p, rounds, pass*100, low*100)
	}
	pass, _, rounds := Operating(rule, rule.Max, 0.5)
	fmt.Fprintf(&b, "| 0.50 | %.2f | %.2f%% |\n", rounds, pass*100)
	return b.String()
}

func TestLoadRoundsTable(t *testing.T) {
	const path = "../../docs/measuring.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, loadTableStart), strings.Index(doc, loadTableEnd)
	if i < 0 || j < i {
		t.Fatalf("measuring.md lacks the markers %q and %q", loadTableStart, loadTableEnd)
	}
	got, want := doc[i+len(loadTableStart):j], loadRoundsTable()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(loadTableStart)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("measuring.md's table of load rounds is not the code's; go test ./internal/judge -run TestLoadRoundsTable -update rewrites it:\n%s\nwant:\n%s", got, want)
}

// docs/measuring.md's table of the floor against time-slicing, between
// these markers.
const (
	floorTableStart = "<!-- load-floor-table: made by go test ./internal/judge -run TestLoadFloorTable -update -->\n"
	floorTableEnd   = "<!-- /load-floor-table -->\n"
)

// meets is the chance that a round of a serve whose η is eta meets floor,
// when a round's η varies normally by sigma of itself (one standard
// deviation).
func meets(eta, sigma, floor float64) float64 {
	return 0.5 * math.Erfc((floor/eta-1)/(sigma*math.Sqrt2))
}

// loadFloorTable is the chance a run passes at its defaults (--lead 3, at
// most 11 rounds), exact from the rule (Operating), for serves that
// time-slice one device (η = 1/N) and serves that batch, at the old floor
// (0.5) and the default (DefaultEfficiency).
func loadFloorTable() string {
	var b strings.Builder
	b.WriteString("| serve | N | η | a round's η varies by | floor | a round meets it | the run passes | rounds |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	rule := Rule{Lead: stats.DefaultLead, Min: 1, Max: 11}
	for _, r := range []struct {
		serve      string
		n          int
		eta, sigma float64
		floor      float64
	}{
		{"time-slicing", 2, Sliced(2), 0.10, 0.5},
		{"time-slicing", 2, Sliced(2), 0.10, DefaultEfficiency(2)},
		{"time-slicing", 2, Sliced(2), 0.15, DefaultEfficiency(2)},
		{"time-slicing", 4, Sliced(4), 0.10, DefaultEfficiency(4)},
		{"time-slicing", 4, Sliced(4), 0.15, DefaultEfficiency(4)},
		{"batching (simulated, --batch-cost 0.1)", 2, 1 / 1.1, 0.10, DefaultEfficiency(2)},
		{"batching, poorly", 2, 0.75, 0.10, DefaultEfficiency(2)},
		{"batching (simulated, --batch-cost 0.1)", 4, 1 / 1.3, 0.10, DefaultEfficiency(4)},
		{"batching, poorly", 4, 0.6, 0.10, DefaultEfficiency(4)},
	} {
		p := meets(r.eta, r.sigma, r.floor)
		pass, _, rounds := Operating(rule, rule.Max, p)
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.0f%% | %.2f | %s | %s | %.2f |\n", r.serve, r.n, r.eta, r.sigma*100, r.floor, percent(p), percent(pass), rounds)
	}
	return b.String()
}

// percent is a chance as the tables give it: to two places, to one figure
// below 0.01%, and below one in a million as such.
func percent(p float64) string {
	switch {
	case p >= 1e-4:
		return fmt.Sprintf("%.2f%%", p*100)
	case p >= 1e-6:
		return fmt.Sprintf("%.1g%%", p*100)
	}
	return "< 0.0001%"
}

func TestLoadFloorTable(t *testing.T) {
	const path = "../../docs/measuring.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, floorTableStart), strings.Index(doc, floorTableEnd)
	want := loadFloorTable()
	if i < 0 || j < i {
		if *update {
			t.Fatalf("measuring.md lacks the markers %q and %q; the table:\n%s", floorTableStart, floorTableEnd, want)
		}
		t.Fatalf("measuring.md lacks the markers %q and %q", floorTableStart, floorTableEnd)
	}
	got := doc[i+len(floorTableStart) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(floorTableStart)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("measuring.md's table of the load floor is not the code's; go test ./internal/judge -run TestLoadFloorTable -update rewrites it:\n%s\nwant:\n%s", got, want)
}
