package fleet

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// History is the median decode rate of each job in earlier releases: the
// latest successful runs on the baseline's pattern, oldest first.
type History struct {
	Releases []string             // the runs' branches or tags, oldest first
	Medians  map[string][]float64 // by check name, one a release; NaN where it has none
}

// chart is a Mermaid line chart (GitHub draws it) of each job's median
// decode rate over the earlier releases and this run. A job that misses a
// release is left out of the chart, and said so: a line cannot skip a point.
func (h *History) chart(m *Merged) string {
	if h == nil || len(h.Releases) == 0 {
		return ""
	}
	var lines, names, left []string
	top := 0.0
	for i := range m.Rows {
		r := &m.Rows[i]
		now, ok := r.Rate()
		values := h.Medians[r.CheckName]
		complete := ok && len(values) == len(h.Releases)
		for _, v := range values {
			complete = complete && !math.IsNaN(v)
		}
		if !complete {
			left = append(left, r.Job.Model()+" on "+r.Job.Device())
			continue
		}
		var xs []string
		for _, v := range append(values[:len(values):len(values)], now) {
			v = math.Round(v*10) / 10
			top = max(top, v)
			xs = append(xs, strconv.FormatFloat(v, 'f', -1, 64))
		}
		lines = append(lines, "    line ["+strings.Join(xs, ", ")+"]\n")
		names = append(names, fmt.Sprintf("%d: %s on %s", len(names)+1, r.Job.Model(), r.Job.Device()))
	}
	if len(lines) == 0 {
		return ""
	}
	var xs []string
	for _, rel := range h.Releases {
		xs = append(xs, `"`+label(rel)+`"`)
	}
	xs = append(xs, `"this run"`)
	var b strings.Builder
	b.WriteString("\n```mermaid\nxychart-beta\n    title \"Median decode rate by release (tok/s)\"\n")
	fmt.Fprintf(&b, "    x-axis [%s]\n    y-axis \"tok/s\" 0 --> %s\n", strings.Join(xs, ", "), strconv.FormatFloat(math.Ceil(top+top/10), 'f', -1, 64))
	for _, l := range lines {
		b.WriteString(l)
	}
	b.WriteString("```\n\n<sub>lines, in order: " + cells(names) + ".")
	if len(left) > 0 {
		b.WriteString(" Not drawn (no median in every release): " + cells(left) + ".")
	}
	b.WriteString("</sub>\n")
	return b.String()
}

// label keeps a branch or tag name to what a chart's quoted label holds.
func label(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._/-", c) {
			return c
		}
		return '_'
	}, s)
}

func cells(xs []string) string {
	var out []string
	for _, x := range xs {
		out = append(out, cellOf(x))
	}
	return strings.Join(out, "; ")
}

func cellOf(s string) string { return report.Cell(s, 200) }
