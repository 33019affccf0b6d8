package report

import (
	"fmt"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// loadTable is the load rounds' figures for the summary, "" without --load
// or rounds.
func loadTable(r *Result) string {
	if r.Load == nil || len(r.LoadRounds) == 0 {
		return ""
	}
	l := r.Load.Limits
	var b strings.Builder
	fmt.Fprintf(&b, "\n#### Load: %d streams at once, %s expected\n\n", l.Streams, Cell(l.Expect, 10))
	b.WriteString("| round | η | decoding at once | aggregate | per stream | worst first token | gap between streams |\n|---:|---:|---:|---:|---|---:|---:|\n")
	for _, rd := range r.LoadRounds {
		if rd.Failed != "" {
			fmt.Fprintf(&b, "| %d | failed: %s | | | | | |\n", rd.N, Cell(rd.Failed, 300))
			continue
		}
		var rates []string
		for _, v := range rd.Rates {
			rates = append(rates, fmt.Sprintf("%.1f", v))
		}
		agg := fmt.Sprintf("%.1f tok/s", rd.Aggregate)
		if rd.Conservative {
			agg += " (conservative)"
		}
		gap := "—"
		if rd.Gaps > 0 {
			gap = fmt.Sprintf("%.0f ms (%d)", rd.GapMS, rd.Gaps)
		}
		fmt.Fprintf(&b, "| %d | %.2f | %.1f | %s | %s | %.0f ms | %s |\n", rd.N, rd.Efficiency, rd.Concurrency, agg, strings.Join(rates, ", "), rd.WorstFirstMS, gap)
	}
	fmt.Fprintf(&b, "\n<sub>aggregate: the tokens that arrived while all %d streams were decoding, over that window (wall clock), never the sum of the streams' rates; conservative: the window was shorter than %.0f%% of the median stream's decode, so the tokens are spread over the round's whole decode span, which can only understate it. decoding at once: the streams' decode time over the round's span. η: aggregate / (%d × the single-stream median). gap: from one stream's last token to the next one's first, where they ran one after another. The round is the sample; at most %d rounds.</sub>\n",
		l.Streams, judge.MinWindow*100, l.Streams, l.MaxRounds)
	return b.String()
}

// LoadText is the load's figures in a few words, for the fleet's table: ""
// without --load.
func LoadText(r *Result) string {
	if r == nil || r.Load == nil {
		return ""
	}
	l := r.Load.Limits
	var eta, conc, worst []float64
	for _, rd := range r.LoadRounds {
		if rd.Failed == "" {
			eta, conc, worst = append(eta, rd.Efficiency), append(conc, rd.Concurrency), append(worst, rd.WorstFirstMS)
		}
	}
	if len(eta) == 0 {
		return fmt.Sprintf("%d streams, %s: no round measured", l.Streams, Cell(l.Expect, 10))
	}
	return fmt.Sprintf("%d streams, %s: η %.2f, %.1f at once, worst first token %.0f ms (medians of %d rounds)",
		l.Streams, Cell(l.Expect, 10), stats.Median(eta), stats.Median(conc), stats.Median(worst), len(eta))
}
