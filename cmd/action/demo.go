package main

import (
	"context"
	"fmt"
	"os"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
)

// demo runs the gate against the simulated serve, started as a child of this
// same binary, so the whole pipeline runs: process group, health, stream,
// stop and judging.
func (e *env) demo(ctx context.Context, args []string) int {
	fs := e.flagSet("demo")
	route := fs.String("route", "fast", "the route the simulated serve takes: fast or slow (the silent fallback)")
	maxTokens := fs.Int("max-tokens", 16, "tokens a reply asks: fewer, a shorter demo (the slow route streams 6 tok/s)")
	out := fs.String("out", "", "out directory (default: a fresh one)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *route != fakellm.RouteFast && *route != fakellm.RouteSlow {
		fmt.Fprintf(e.stderr, "npu-serve-smoke demo: --route %q: pass fast or slow\n", *route)
		return exitUsage
	}
	if *maxTokens < 2 || *maxTokens > config.MaxMaxTokens {
		fmt.Fprintf(e.stderr, "npu-serve-smoke demo: --max-tokens %d: pass 2 to %d (a decode rate needs at least two tokens)\n", *maxTokens, config.MaxMaxTokens)
		return exitUsage
	}
	if e.parseOnly {
		return exitPass
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke demo: cannot find this program (%v)\n", err)
		return exitFail
	}
	c := config.Default()
	c.Serve = config.QuoteWords(self, "fakellm", "--port", "{port}", "--route", *route, "--model", "{model}")
	c.Model = "sim-0.6B"
	c.Replies, c.Warmup, c.MaxTokens = 3, 1, *maxTokens
	c.Out = *out
	c.Hold = "none" // the simulated serve needs no device
	fmt.Fprintf(e.stderr, "demo: the gate against the simulated serve on the %s route\n", *route)
	return e.gate(ctx, c, nil)
}
