package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/probe"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// loadRounds is --load N: once the single-stream assertions have passed (no
// device time spent loading a serve already failed), rounds of N requests
// started together, each on a connection of its own with a prompt of its
// own (a distinct leading salt, so no prefix cache helps), the next round
// once all N ended, until the sequential rule stops on the rounds' signs.
// Each request is bounded by --request-timeout, as a single reply is.
func (g *Gate) loadRounds(res *report.Result, a *asker, base string) {
	p := g.Plan
	if p.Load == 0 || p.Kind == report.KindReference {
		return
	}
	lr := &judge.LoadRun{Limits: p.LoadLimits()}
	res.Load = lr
	if why := singleFailed(res); why != "" {
		lr.Skipped = why
		g.logf("load: not measured: %s", why)
		return
	}
	if why := g.slotsShort(a.ctx, base); why != "" {
		lr.Skipped = why
		g.logf("load: not measured: %s", why)
		return
	}
	single := judge.SingleOf(res.Replies, res.Limits.RateSource)
	// No logprobs under load: the rounds judge timing, and N streams of
	// top-5 alternatives would swell result.json past what judge reads.
	pr := g.prober(base)
	pr.TopLogprobs = 0
	g.logf("load: rounds of %d streams at once, %s expected (at most %d rounds)", p.Load, lr.Limits.Expect, lr.Limits.MaxRounds)
	var rounds []judge.Round
	for n := 1; !judge.LoadStop(rounds, lr.Limits, single, p.FirstTokenMS, p.Lead); n++ {
		if a.ctx.Err() != nil {
			return
		}
		select {
		case <-a.proc.Done():
			lr.Exit = "the serve " + a.proc.Exit() + " before round " + fmt.Sprint(n)
			g.logf("load: %s", lr.Exit)
			return
		default:
		}
		replies := a.round(pr, n, p.Load)
		lr.Rounds = append(lr.Rounds, replies)
		rd := judge.RoundOf(n, replies, single)
		rounds = append(rounds, rd)
		g.logf("%s", roundLine(rd))
		if rd.Failed != "" && a.ctx.Err() == nil {
			// A serve that died under load: give its exit a moment to
			// be seen, so the row says so.
			select {
			case <-a.proc.Done():
				lr.Exit = "the serve " + a.proc.Exit() + " during round " + fmt.Sprint(n)
				g.logf("load: %s", lr.Exit)
			case <-time.After(time.Second):
			}
		}
	}
	s, _ := judge.LoadSignsOf(rounds, lr.Limits, single, p.FirstTokenMS, p.Lead)
	g.logf("load: stopped after %d round(s): first token %d meet, %d miss%s", len(rounds), s.FirstToken.Meet, s.FirstToken.Miss, effText(s.Efficiency))
}

func effText(c *stats.Count) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("; η %d meet, %d miss", c.Meet, c.Miss)
}

// singleFailed says which single-stream assertions failed, or "" when the
// rate, the first token and the content all passed. The route is read on
// the whole log once the serve has stopped, so it is judged then.
func singleFailed(res *report.Result) string {
	if len(res.Replies) == 0 {
		return "no single-stream reply was recorded"
	}
	v := judge.Judge(judge.Input{Replies: res.Replies, Limits: res.Limits})
	var failed []string
	for _, as := range v.Assertions {
		switch as.Name {
		case judge.Rate, judge.FirstToken, judge.Content:
			if !as.OK {
				failed = append(failed, as.Name)
			}
		}
	}
	if len(failed) == 0 {
		return ""
	}
	return "the single-stream assertions failed first (" + strings.Join(failed, ", ") + "): no device time spent loading a serve already failed"
}

// slotsShort asks llama-server's /props, under the llama.cpp preset, how
// many slots it has, and says why the rounds cannot be asked when a batching
// serve has fewer than --load; "" otherwise, or when it does not say.
func (g *Gate) slotsShort(ctx context.Context, base string) string {
	p := g.Plan
	if p.Preset != "llama.cpp" || p.LoadLimits().Expect != judge.LoadBatch {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/props", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var props struct {
		TotalSlots int `json:"total_slots"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&props) != nil || props.TotalSlots <= 0 {
		return ""
	}
	if props.TotalSlots >= p.Load {
		return ""
	}
	return fmt.Sprintf("--load %d is above the serve's %d slots (llama-server's /props, total_slots): start it with -np %d, or pass --load %d or --load-expect serial", p.Load, props.TotalSlots, p.Load, props.TotalSlots)
}

// round asks n streams at once with pr: each on its own connection (the
// probe opens one a request), all written together.
func (a *asker) round(pr *probe.Prober, round, n int) []measure.Reply {
	ps := a.g.Plan.Prompts
	replies := make([]measure.Reply, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		prompt := ps[(round*n+i)%len(ps)]
		prompt.Prompt = fmt.Sprintf("[%s, load round %d, stream %d] %s", salt(), round, i+1, prompt.Prompt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = pr.Ask(a.ctx, i+1, false, prompt)
		}()
	}
	close(start)
	wg.Wait()
	return replies
}

// salt is a prompt's leading salt: a prefix no other request shares.
func salt() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// roundLine is one console line about a round.
func roundLine(rd judge.Round) string {
	if rd.Failed != "" {
		return fmt.Sprintf("load round %d: %s", rd.N, rd.Failed)
	}
	note := ""
	if rd.Conservative {
		note = " (conservative: no window where all decoded)"
	}
	return fmt.Sprintf("load round %d: η %.2f, %.1f decoding at once, aggregate %.1f tok/s%s, worst first token %.0f ms",
		rd.N, rd.Efficiency, rd.Concurrency, rd.Aggregate, note, rd.WorstFirstMS)
}
