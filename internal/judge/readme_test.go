package judge

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

var update = flag.Bool("update", false, "rewrite README.md's table of the sequential rule from the code")

// The README's table of the sequential rule, between these markers.
const (
	tableStart = "<!-- sequential-rule-table: made by go test ./internal/judge -run TestREADMETable -update -->\n"
	tableEnd   = "<!-- /sequential-rule-table -->\n"
)

// ruleTable is the table of expected replies and wrong verdicts of the
// sequential rule at its defaults (--lead 3, --replies 1, --max-replies
// 15) and of the rule before it (5 replies, then more while the median's
// interval holds the floor, up to 15), exact, at each p: the chance that a
// reply meets the floor. A wrong verdict is a pass below p = ½ and a fail
// above it (a tie, which only an even cap allows, counted wrong); at p = ½
// either is right, and the table gives the chance of a pass.
func ruleTable() string {
	var b strings.Builder
	b.WriteString("| p | before: replies | before: wrong | sequential: replies | sequential: wrong | replies saved |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	wrong := func(p, pass, tie float64) string {
		switch {
		case p < 0.5:
			return fmt.Sprintf("%.1f%%", (pass+tie)*100)
		case p > 0.5:
			return fmt.Sprintf("%.1f%%", (1-pass)*100)
		}
		return fmt.Sprintf("(pass %.1f%%)", pass*100)
	}
	for _, p := range []float64{0.05, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.95} {
		op, ot, on := Operating(Legacy{Min: 5, Max: 15}, 15, p)
		np, nt, nn := Operating(Rule{Lead: stats.DefaultLead, Min: 1, Max: 15}, 15, p)
		fmt.Fprintf(&b, "| %.2f | %.1f | %s | %.1f | %s | %.0f%% |\n", p, on, wrong(p, op, ot), nn, wrong(p, np, nt), (1-nn/on)*100)
	}
	return b.String()
}

// README.md's table is the one the code computes; -update rewrites it.
func TestREADMETable(t *testing.T) {
	const path = "../../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, tableStart), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q and %q", tableStart, tableEnd)
	}
	got, want := readme[i+len(tableStart):j], ruleTable()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(readme[:i+len(tableStart)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's table of the sequential rule is not the code's; go test ./internal/judge -run TestREADMETable -update rewrites it:\n%s\nwant:\n%s", got, want)
}
