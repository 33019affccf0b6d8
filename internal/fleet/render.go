package fleet

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// Console writes a line per row, then the verdict:
//
//	Qwen3-0.6B  npu   ok    median 84.4 tok/s (floor 60.0), first token 277 ms, route fast
//	RESULT: FAIL (4 of 6 jobs passed; 1 failed, 1 missing)
func (m *Merged) Console(w io.Writer) {
	mw, dw := len("model"), len("device")
	for _, r := range m.Rows {
		mw, dw = max(mw, len(r.Job.Model())), max(dw, len(r.Job.Device()))
	}
	for _, r := range m.Rows {
		status := map[string]string{Pass: "ok", Fail: "FAIL", Missing: "MISS"}[r.State]
		detail := figures(&r)
		if len(r.Why) > 0 {
			detail = strings.Join(r.Why, "; ")
		}
		fmt.Fprintf(w, "%-*s  %-*s  %-4s  %s\n", mw, report.ConsoleText(r.Job.Model()), dw, report.ConsoleText(r.Job.Device()), status, report.ConsoleText(detail))
	}
	for _, d := range m.Unexpected {
		fmt.Fprintf(w, "not in the matrix, not judged: %s\n", report.ConsoleText(d))
	}
	fmt.Fprintf(w, "RESULT: %s\n", m.Title())
}

func figures(r *Row) string {
	var parts []string
	if v, ok := r.Rate(); ok {
		parts = append(parts, fmt.Sprintf("median %.1f tok/s (floor %.1f)", v, r.Result.Limits.Floor))
	}
	if v, ok := r.FirstToken(); ok {
		parts = append(parts, fmt.Sprintf("first token %.0f ms", v))
	}
	if r.Result != nil {
		parts = append(parts, "route "+report.RouteName(r.Result.Route))
	}
	if c := change(r); c != "" {
		parts = append(parts, "against the baseline "+c)
	}
	if a := agreement(r); a != "" {
		parts = append(parts, "agreement "+a)
	}
	if l := report.LoadText(r.Result); l != "" {
		parts = append(parts, "load "+l)
	}
	return strings.Join(parts, ", ")
}

// agreement is how many of the row's replies compared with its reference
// agree with it ("5/5 agree", "3/5 agree"), or "" when the row has no
// reference.
func agreement(r *Row) string {
	if r.Result == nil || r.Result.Reference == nil {
		return ""
	}
	ok, of := 0, 0
	for _, a := range r.Result.Agreement {
		if a.RefN == 0 {
			continue
		}
		of++
		if a.OK {
			ok++
		}
	}
	return fmt.Sprintf("%d/%d agree", ok, of)
}

// anyReference reports whether a row has a reference: the merged table
// then has an agreement column.
func (m *Merged) anyReference() bool {
	for i := range m.Rows {
		if agreement(&m.Rows[i]) != "" {
			return true
		}
	}
	return false
}

// anyEnergy reports whether a row has joules per token: the merged table
// then has an energy column. Rows whose runner has no sensor add none.
func (m *Merged) anyEnergy() bool {
	for i := range m.Rows {
		if r := m.Rows[i].Result; r != nil && r.Energy != nil && r.Energy.GrossJPerToken != nil {
			return true
		}
	}
	return false
}

// anyLoad reports whether a row ran --load: the merged table then has a
// load column.
func (m *Merged) anyLoad() bool {
	for i := range m.Rows {
		if report.LoadText(m.Rows[i].Result) != "" {
			return true
		}
	}
	return false
}

// energyCell is a row's gross joules per decoded token (what a ceiling
// judges), the net figure beside it where there is one, and its source, or
// why there is none.
func energyCell(r *Row) string {
	if r.Result == nil || r.Result.Energy == nil {
		return "—"
	}
	e := r.Result.Energy
	if e.GrossJPerToken != nil && e.NetJPerToken != nil {
		return fmt.Sprintf("%.3g J/token gross, %.3g net (%s)", *e.GrossJPerToken, *e.NetJPerToken, report.Cell(e.Source, 60))
	}
	if e.GrossJPerToken != nil {
		return fmt.Sprintf("%.3g J/token gross (%s)", *e.GrossJPerToken, report.Cell(e.Source, 60))
	}
	return "unavailable"
}

// change is the row's median rate and first token against its baseline.
func change(r *Row) string {
	b := r.Baseline
	rate, okR := r.Rate()
	ft, okF := r.FirstToken()
	if b == nil || !okR || !okF {
		return ""
	}
	return fmt.Sprintf("%+.1f%% rate, %+.1f%% first token", (rate-b.Rate)/b.Rate*100, (ft-b.FirstTokenMS)/b.FirstTokenMS*100)
}

// Markdown is the merged report for the check run and the PR comment: one
// table, a row per job, then what failed, at most limit bytes.
func (m *Merged) Markdown(limit int, history *History) string {
	var b strings.Builder
	icon := "❌"
	if m.Pass() {
		icon = "✅"
	}
	fmt.Fprintf(&b, "### %s %s: %s\n\n", icon, report.Cell(m.Base, 100), m.Title())
	refs, joules, loads := m.anyReference(), m.anyEnergy(), m.anyLoad()
	b.WriteString("| model | device | verdict | median rate (floor) | first token (limit) | route | against the baseline |")
	if refs {
		b.WriteString(" agreement |")
	}
	if loads {
		b.WriteString(" load |")
	}
	if joules {
		b.WriteString(" energy |")
	}
	b.WriteString("\n|---|---|---|---:|---:|---|---|")
	if refs {
		b.WriteString("---|")
	}
	if loads {
		b.WriteString("---|")
	}
	if joules {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for i := range m.Rows {
		r := &m.Rows[i]
		verdict := map[string]string{Pass: "✅ pass", Fail: "❌ FAIL", Missing: "❌ missing"}[r.State]
		rate, first, route, base := "—", "—", "—", "—"
		if v, ok := r.Rate(); ok {
			rate = fmt.Sprintf("%.1f tok/s (%s)", v, num(r.Result.Limits.Floor))
		}
		if v, ok := r.FirstToken(); ok {
			first = fmt.Sprintf("%.0f ms (%s)", v, num(r.Result.Limits.FirstTokenMS))
		}
		if r.Result != nil {
			route = report.RouteName(r.Result.Route)
		}
		switch c := change(r); {
		case c != "":
			base = c
		case r.Note != "":
			base = "none: " + report.Cell(r.Note, 200)
		}
		if refs {
			agrees := agreement(r)
			if agrees == "" {
				agrees = "no reference"
			}
			base += " | " + agrees
		}
		if loads {
			l := report.LoadText(r.Result)
			if l == "" {
				l = "—"
			}
			base += " | " + l
		}
		if joules {
			base += " | " + energyCell(r)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", report.Cell(r.Job.Model(), 100), report.Cell(r.Job.Device(), 50), verdict, rate, first, route, base)
	}
	var why strings.Builder
	for _, r := range m.Rows {
		for _, w := range r.Why {
			fmt.Fprintf(&why, "- **%s on %s**: %s\n", report.Cell(r.Job.Model(), 100), report.Cell(r.Job.Device(), 50), report.Cell(w, 600))
		}
	}
	if why.Len() > 0 {
		b.WriteString("\n" + why.String())
	}
	if len(m.Unexpected) > 0 {
		b.WriteString("\nNot in the matrix, not judged: ")
		var names []string
		for _, d := range m.Unexpected {
			names = append(names, report.Cell(d, 100))
		}
		b.WriteString(strings.Join(names, ", ") + "\n")
	}
	if m.RunURL != "" {
		fmt.Fprintf(&b, "\nEach job's log, summary and artifact: [the workflow run](%s).\n", m.RunURL)
	}
	if history != nil {
		b.WriteString(history.chart(m))
	}
	fmt.Fprintf(&b, "\n<sub>Each row is re-judged here from its job's evidence (serve log and replies) with the limits of this merge. Rates are the median decode rate, (tokens − 1) / (last − first chunk); a job whose out/ was not uploaded as its artifact is a missing row, never a pass.</sub>\n")
	return report.Cut(b.String(), limit)
}

func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}
