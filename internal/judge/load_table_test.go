package judge

import (
	"fmt"
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
