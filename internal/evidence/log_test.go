package evidence

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// serve.log comes from an artifact: a FIFO there is refused at once (its
// open would block), and a long log's reading stops with the context.
func TestJudgeUnsafeLog(t *testing.T) {
	const claims = `{"schema": "npu-serve-smoke/v1", "verdict": "pass"}`
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		make    func(*testing.T, string)
		want    string
		verdict string
	}{
		{name: "a FIFO", ctx: context.Background(), make: mkfifo, want: "serve.log is not a regular file (p", verdict: report.Fail},
		{name: "a 4 GB log, cancelled", ctx: cancelled, make: func(t *testing.T, path string) {
			os.WriteFile(path, nil, 0o644)
			if err := os.Truncate(path, 4<<30); err != nil {
				t.Fatal(err)
			}
		}, want: "judging was cancelled after 0 bytes of serve.log (context canceled)", verdict: report.Cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := wintest.TempDir(t)
			os.WriteFile(filepath.Join(dir, report.ResultFile), []byte(claims), 0o644)
			tc.make(t, filepath.Join(dir, report.LogFile))
			res, err := report.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			err = Judge(tc.ctx, dir, res, judge.Limits{Floor: 1, FirstTokenMS: 1000, RateSource: judge.RateClient}, route.DefaultFast, route.DefaultSlow, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Judge(%s) = %v, want %q", tc.name, err, tc.want)
			}
			if res.Verdict != tc.verdict {
				t.Errorf("Judge(%s) verdict = %s, want %s", tc.name, res.Verdict, tc.verdict)
			}
		})
	}
}
