package publish

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// StepSummaryLimit keeps the job summary under GitHub's 1 MiB a step.
const StepSummaryLimit = 1000 << 10

// Step reports a run to the job it runs in: the job summary, the step
// outputs and one error annotation per failed assertion. files is the
// directory holding this verdict's result.json and summary.md, which the
// outputs name ("" when there are none). The environment files are only
// written when the runner provides them.
func Step(a *githubactions.Action, getenv func(string) string, res *report.Result, files string, checkID int64) {
	if getenv("GITHUB_STEP_SUMMARY") != "" {
		a.AddStepSummary(report.Markdown(res, StepSummaryLimit))
	}
	if getenv("GITHUB_OUTPUT") != "" {
		for k, v := range Outputs(res, files, checkID) {
			a.SetOutput(k, v)
		}
	}
	for _, as := range res.Assertions {
		if !as.OK {
			// go-githubactions escapes only %, CR and LF in a command's
			// data: the rest of a detail from elsewhere is made safe here.
			a.WithFieldsMap(map[string]string{"title": "npu serve smoke: " + as.Name}).Errorf("%s", console.Text(as.Detail))
		}
	}
}

// Outputs are the step outputs of a run; result-json and summary-md name
// the files in the directory files, and are empty when it is "".
func Outputs(res *report.Result, files string, checkID int64) map[string]string {
	out := map[string]string{
		"result":         "fail",
		"rate":           "",
		"first-token-ms": "",
		"route":          report.RouteName(res.Route),
		"agreement":      "",
		"energy":         "",
		"energy-net":     "",
		"result-json":    "",
		"summary-md":     "",
		"check-run-id":   "",
	}
	if files != "" {
		out["result-json"] = filepath.Join(files, report.ResultFile)
		out["summary-md"] = filepath.Join(files, report.SummaryFile)
	}
	if res.Pass() {
		out["result"] = "pass"
	}
	if m, ok := res.Median(res.Rate); ok {
		out["rate"] = fmt.Sprintf("%.1f", m)
	}
	if m, ok := res.Median((*measure.Reply).FirstTokenMS); ok {
		out["first-token-ms"] = fmt.Sprintf("%.0f", m)
	}
	for _, a := range res.Assertions {
		if a.Name == judge.Agreement {
			out["agreement"] = "fail"
			if a.OK {
				out["agreement"] = "ok"
			}
		}
	}
	// Gross: what --max-joules-per-token judges; the net figure beside it.
	if e := res.Energy; e != nil && e.GrossJPerToken != nil {
		out["energy"] = fmt.Sprintf("%.4g", *e.GrossJPerToken)
		if e.NetJPerToken != nil {
			out["energy-net"] = fmt.Sprintf("%.4g", *e.NetJPerToken)
		}
	}
	if checkID != 0 {
		out["check-run-id"] = fmt.Sprint(checkID)
	}
	return out
}

// Timeout bounds the posts. After a cancel they get 2.5 s: the serve's stop
// takes at most CancelGrace (2 s), and the check run must be completed
// within 5 s of the runner's SIGINT.
func Timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), 2500*time.Millisecond)
	}
	return context.WithTimeout(ctx, 5*time.Minute)
}
