// Package evidence judges a finished run again from its evidence alone: the
// serve's log and the reply files in its out directory, against limits and
// route patterns given by whoever judges, never the ones the run wrote down.
package evidence

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/logscan"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// Judge judges the run in dir, read as res (report.Read: the reply files
// over result.json's replies), with the limits l, the route patterns fast and
// slow, and the baseline b. Whatever verdict, assertions, limits, route and
// baseline result.json claimed are replaced, and so are the log's tail and
// size the report shows: they are the serve.log judged. An unreadable log is
// judged as empty (the route then fails), shown with no tail, and said in the
// error. serve.log is opened as report.Open opens a run's files (a FIFO or a
// link there is unreadable), and its reading stops when ctx is done: the
// verdict is then Cancelled, never one of a log read in part.
func Judge(ctx context.Context, dir string, res *report.Result, l judge.Limits, fast, slow []string, b *judge.Baseline) error {
	m, err := route.NewMatcher(fast, slow)
	if err != nil {
		return err
	}
	res.Limits, res.Baseline = l, b
	scan, err := scanLog(ctx, filepath.Join(dir, report.LogFile), m)
	res.Route = scan.Route
	res.Serve.LogTail, res.Serve.LogBytes = scan.Tail, scan.Bytes
	// serve.log may have been cut to --log-limit: the route detail says
	// how much of the log this reading could not see.
	res.Route.Dropped = res.Serve.LogDropped
	res.Judged(judge.Judge(res.Input()))
	if ctx.Err() != nil {
		res.Verdict = report.Cancelled
		return fmt.Errorf("judging was cancelled after %d bytes of %s (%v)", scan.Bytes, report.LogFile, context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("%v; the route is judged on an empty log", err)
	}
	return nil
}

// AsRun makes res the result of a run (report.KindRun), whatever kind its
// result.json claims, and says what it claimed ("" when it claimed a run).
// publish and the fleet merge judge every artifact as a run: a recording's
// route, rate and first token are recorded, not judged (report.NotJudged),
// so a kind read from an artifact would let its writer turn a failing run
// into a pass with one field. Only `judge DIR` honours the run's kind.
func AsRun(res *report.Result) string {
	kind := res.Run.Kind
	if kind == report.KindRun {
		return ""
	}
	res.Run.Kind = report.KindRun
	if len(kind) > 40 {
		kind = kind[:40] + "..."
	}
	return fmt.Sprintf("%s says run.kind %s (a recording, whose route, rate and first token are not judged); it is judged as a run here: a recording is no verdict on the code", report.ResultFile, strconv.Quote(kind))
}

// scanLog scans the serve.log at path, as a run's file (report.Open), until
// its end or until ctx is done.
func scanLog(ctx context.Context, path string, m *route.Matcher) (logscan.Result, error) {
	f, err := report.Open(path)
	if err != nil {
		return logscan.Result{Route: m.Evidence()}, err
	}
	defer f.Close()
	scan, err := logscan.Scan(ctxReader{ctx, f}, m)
	if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return scan, err
}

// ctxReader reads r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
