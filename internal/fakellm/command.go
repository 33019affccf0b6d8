package fakellm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Profiles: the rates and first-token delays a route streams at unless
// --rate and --first-token-ms say otherwise. The slow route is the per-op
// forward: far below any floor, and slow to its first token.
var profiles = map[string]struct {
	rates   []float64
	firstMS float64
}{
	RouteFast:    {[]float64{90}, 250},
	RouteBoth:    {[]float64{90}, 250},
	RouteNeither: {[]float64{90}, 250},
	RouteSlow:    {[]float64{6}, 1063},
	RoutePartial: {[]float64{30}, 400},
}

// Command runs the simulated serve as a program: `fakellm --port N [flags]`.
// It is the serve the demo and the end-to-end tests start; it prints its log
// to stdout and stops on SIGTERM or SIGINT (unless told to ignore TERM, as a
// serve with a stream open does); on Windows on CTRL_BREAK_EVENT or
// CTRL_C_EVENT (unless told to ignore the break).
func Command(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "gguf" {
		return ggufCommand(args[1:], stderr)
	}
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opt         Options
		port        = fs.Int("port", 8080, "port to listen on (127.0.0.1)")
		rates       = fs.String("rate", "", "decode rate in tok/s, one figure or one a request: 70,70,1.9 (default by route: fast 90, slow 6)")
		firstMS     = fs.Float64("first-token-ms", -1, "delay before the first token (default by route: fast 250, slow 1063)")
		exitAtStart = fs.Int("exit-at-start", 0, "print a fatal line and exit with this status at start")
		ignoreTerm  = fs.Bool("ignore-term", false, "ignore SIGTERM (a serve that will not stop; Windows: ignore CTRL_BREAK_EVENT)")
		detach      = fs.Bool("spawn-detached", false, "start a helper in a session of its own that sleeps, as a serve's helper might (Windows: in a process group of its own)")
		breakaway   = fs.Bool("spawn-breakaway", false, "start a helper that sleeps in a session of its own and print its pid (Windows: in a process group of its own, asking to break away from the job with CREATE_BREAKAWAY_FROM_JOB, started in the job when that is refused)")
		helperOf    = fs.String("helper-of", "", "be the helper of this model that --spawn-detached starts on Windows: sleep 10 minutes, then exit")
		closeStdio  = fs.Bool("close-stdio", false, "close stdin, stdout and stderr once listening")
		unlock      = fs.Bool("unlock-inherited", false, "at start, flock(LOCK_UN) every regular file it inherited from fd 3 on (a device ticket's lock, if it has one), as a hostile serve can (Windows: UnlockFileEx on every file handle it inherited)")
		stopParent  = fs.Bool("stop-parent", false, "once listening, stop its parent with SIGSTOP (its supervisor), as a hostile serve can (Windows: NtSuspendProcess)")
		holdDevice  = fs.String("hold-device", "", "open this path at start and hold it open, as a serve holds its device node")
		mapLibrary  = fs.String("map-library", "", "map this file at start and keep it mapped, as a serve maps its backend library (Windows: load this DLL, LoadLibraryEx)")
		deviceMiB   = fs.Int64("device-mib", 0, "with --device-account: the device memory (MiB) the device's own account attributes to this process")
		account     = fs.String("device-account", "", "write this process's row of nvidia-smi's compute apps (\"PID, MIB\", --device-mib) to DIR/PID at start, for a fake nvidia-smi to list; removed at exit")
	)
	fs.StringVar(&opt.Model, "model", "sim-0.6B", "model name")
	fs.StringVar(&opt.Persona, "persona", "", "behave like a kind of serve: "+strings.Join(PersonaNames(), ", ")+" (default: the reference serve)")
	fs.Float64Var(&opt.RateNoise, "rate-noise", 0, "draw each request's rate from --rate ± this fraction")
	fs.Uint64Var(&opt.Seed, "seed", 1, "seed of --rate-noise")
	decay := fs.String("rate-decay", "", "TO,TAU: a device that throttles: each request's rate falls from --rate toward TO tok/s with a time constant of TAU requests (warm-ups included), before --rate-noise: 57,5")
	fs.BoolVar(&opt.Instant, "instant", false, "stream without pacing; report the nominal rate in timings")
	fs.BoolVar(&opt.Burst, "burst", false, "hold every token and send them in one write at the end, as a buffering proxy does")
	fs.IntVar(&opt.ClaimTokens, "claim-tokens", 0, "send this usage.completion_tokens whatever was streamed (a counter that lies)")
	fs.BoolVar(&opt.Nagle, "nagle", false, "leave Nagle's algorithm on and write headers apart, as Python's http.server does")
	fs.StringVar(&opt.Route, "route", RouteFast, "route the log names: fast, slow, partial, both or neither")
	fs.IntVar(&opt.AnswerTokens, "answer-tokens", 0, "tokens in a full answer (0: more than max_tokens)")
	fs.BoolVar(&opt.ThinkingAlways, "thinking-always", false, "reason even when the request turns thinking off")
	fs.StringVar(&opt.ReasoningField, "reasoning-field", "", "the delta field reasoning goes in (default: the persona's)")
	fs.IntVar(&opt.Degenerate, "degenerate", 0, "request N answers one character repeated")
	fs.IntVar(&opt.ErrorAt, "error-at", 0, "request N answers HTTP 500")
	fs.IntVar(&opt.ExitMidStream, "exit-mid-stream", 0, "the serve exits during request N")
	fs.IntVar(&opt.Stall, "stall", 0, "request N stops sending after three tokens")
	fs.StringVar(&opt.Content, "content", "", "answer this text instead of generated words")
	fs.StringVar(&opt.Say, "say", "", "print this text to the log at start")
	fs.BoolVar(&opt.NoUsage, "no-usage", false, "never send usage")
	fs.BoolVar(&opt.NoTimings, "no-timings", false, "never send timings")
	fs.BoolVar(&opt.CPUPlatform, "cpu-platform", false, "play vLLM on its CPU platform: /metrics's vllm:cache_config_info sets cpu_kvcache_space_bytes (persona vllm)")
	fs.IntVar(&opt.Slots, "slots", 0, "answer /props with this total_slots, as llama-server does (0: no /props)")
	fs.StringVar(&opt.LoadMode, "load-mode", "", "how requests at once are taken: batch (decoded together, each slowed by --batch-cost for each other one), serial (one at a time, first in first out, --serial-pause-ms before each that waited), slice (one device shared evenly: N at once decode at the rate of one), busy (one at a time; one arriving while another is in flight is answered at once, 200 OK, with \"Server busy, try again later.\") (default: each as if alone)")
	fs.Float64Var(&opt.BatchCost, "batch-cost", 0.1, "--load-mode batch: each request's rate is divided by 1 + this x the others decoding")
	fs.Float64Var(&opt.PauseMS, "serial-pause-ms", DefaultPauseMS, "--load-mode serial: the pause before a request that waited (FastFlowLM's 333 ms)")
	fs.BoolVar(&opt.NeverReady, "never-ready", false, "health answers 503 forever")
	fs.DurationVar(&opt.ReadyAfter, "ready-after", 0, "health answers 503 until this long after start")
	fs.StringVar(&opt.HealthPath, "health-path", "", "health path (default: the persona's)")
	fs.StringVar(&opt.LogprobsShape, "logprobs-shape", "", logprobsHelp)
	sensor := &Sensor{}
	fs.StringVar(&sensor.Path, "sensor", "", "play the device's energy sensor: write to this file, every --sensor-period, the energy used since the start (µJ), or with --sensor-power the power (µW)")
	fs.BoolVar(&sensor.Power, "sensor-power", false, "the sensor gives power (µW), not an energy counter")
	fs.DurationVar(&sensor.Period, "sensor-period", 20*time.Millisecond, "the sensor's update period")
	fs.Float64Var(&sensor.IdleWatts, "idle-watts", 20, "the simulated device's power while no request streams")
	fs.Float64Var(&sensor.BusyWatts, "busy-watts", 100, "the simulated device's power while a request streams")
	fs.Float64Var(&opt.Kernel.Noise, "kernel-noise", 0, "rounding noise: jitter each logit by up to this many nats, the same way for the same prompt, so near-ties can flip (right but rounded)")
	fs.IntVar(&opt.Kernel.Skew, "kernel-skew", 0, "a broken kernel: from token N on, a token the reference ranks last of 20 comes first and the reference's choice fourth, 4.5 nats below")
	fs.IntVar(&opt.Kernel.Decode, "kernel-decode", 0, "a wrong decoding: from token N on, every token's ids and logprobs the reference's, their texts (and the content) other words")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	p, ok := profiles[opt.Route]
	if !ok {
		fmt.Fprintf(stderr, "fakellm: --route %q: want fast, slow, partial, both or neither\n", opt.Route)
		return 2
	}
	if _, ok := personas()[opt.Persona]; !ok {
		fmt.Fprintf(stderr, "fakellm: --persona %q: want one of %s\n", opt.Persona, strings.Join(PersonaNames(), ", "))
		return 2
	}
	if opt.LogprobsShape != "" && !slices.Contains(ShapeNames(), opt.LogprobsShape) {
		fmt.Fprintf(stderr, "fakellm: --logprobs-shape %q: want one of %s\n", opt.LogprobsShape, strings.Join(ShapeNames(), ", "))
		return 2
	}
	if opt.Kernel.Noise < 0 || math.IsNaN(opt.Kernel.Noise) || math.IsInf(opt.Kernel.Noise, 0) || opt.Kernel.Skew < 0 || opt.Kernel.Decode < 0 {
		fmt.Fprintf(stderr, "fakellm: --kernel-noise %v, --kernel-skew %d: want a finite number of nats from 0, and a token number from 1 (0: none)\n", opt.Kernel.Noise, opt.Kernel.Skew)
		return 2
	}
	if _, ok := loadModes[opt.LoadMode]; !ok || !(opt.BatchCost >= 0) || !(opt.PauseMS >= 0) {
		fmt.Fprintf(stderr, "fakellm: --load-mode %q, --batch-cost %v, --serial-pause-ms %v: want one of %s, and numbers from 0\n", opt.LoadMode, opt.BatchCost, opt.PauseMS, strings.Join(LoadModeNames(), ", "))
		return 2
	}
	opt.Rates, opt.FirstTokenMS = p.rates, p.firstMS
	if *rates != "" {
		opt.Rates = nil
		for f := range strings.SplitSeq(*rates, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v < 0 {
				fmt.Fprintf(stderr, "fakellm: --rate %q: want non-negative numbers separated by commas\n", *rates)
				return 2
			}
			opt.Rates = append(opt.Rates, v)
		}
	}
	if *decay != "" {
		d, err := parseDecay(*decay)
		if err != nil {
			fmt.Fprintf(stderr, "fakellm: --rate-decay %q: %v\n", *decay, err)
			return 2
		}
		opt.Decay = d
	}
	if *firstMS >= 0 {
		opt.FirstTokenMS = *firstMS
	}
	opt.Log = stdout
	opt.Exit = os.Exit
	if sensor.Path != "" {
		if sensor.Period <= 0 || sensor.IdleWatts < 0 || sensor.BusyWatts < 0 {
			fmt.Fprintf(stderr, "fakellm: --sensor-period %v, --idle-watts %v, --busy-watts %v: want a positive period and powers from 0\n", sensor.Period, sensor.IdleWatts, sensor.BusyWatts)
			return 2
		}
		opt.Sensor = sensor
		stopSensor := make(chan struct{})
		defer close(stopSensor)
		go func() {
			if err := sensor.Run(stopSensor); err != nil {
				fmt.Fprintf(stdout, "fakellm: sensor: %v\n", err)
			}
		}()
	}

	if *helperOf != "" {
		time.Sleep(helperSleep)
		return 0
	}
	if *exitAtStart != 0 {
		fmt.Fprintf(stdout, "fakellm: loading model %s\nfakellm: fatal: no accelerator found (/dev/accel/accel0: no such file or directory)\n", opt.Model)
		return *exitAtStart
	}
	if *unlock {
		unlockInherited(stdout)
	}
	if *holdDevice != "" {
		f, err := os.OpenFile(*holdDevice, os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintf(stdout, "fakellm: fatal: %v\n", err)
			return 1
		}
		defer f.Close()
		fmt.Fprintf(stdout, "fakellm: holding %s open\n", *holdDevice)
	}
	if *mapLibrary != "" {
		unmap, err := mapFile(*mapLibrary)
		if err != nil {
			fmt.Fprintf(stdout, "fakellm: fatal: %v\n", err)
			return 1
		}
		defer unmap()
		fmt.Fprintf(stdout, "fakellm: mapped %s\n", *mapLibrary)
	}
	if *account != "" {
		remove, err := writeAccount(*account, *deviceMiB)
		if err != nil {
			fmt.Fprintf(stdout, "fakellm: fatal: %v\n", err)
			return 1
		}
		defer remove()
		fmt.Fprintf(stdout, "fakellm: %d MiB of device memory in the device's account\n", *deviceMiB)
	}
	if *detach || *breakaway {
		if err := spawnDetached(opt.Model, args, *breakaway, stdout); err != nil {
			fmt.Fprintf(stderr, "fakellm: spawn: %v\n", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals(*ignoreTerm)...)
	defer stop()

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintf(stdout, "fakellm: fatal: %v\n", err)
		return 1
	}
	if opt.Nagle {
		ln = NagleListener(ln)
	}
	handler := New(opt)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "fakellm: listening on %s\n", ln.Addr())
	if *stopParent {
		stopParentProcess(stdout)
	}
	if *closeStdio {
		// As a daemon does: close stdin, stdout and stderr, and put
		// the null device in their place, so nothing else takes them.
		fmt.Fprintf(stdout, "fakellm: closing stdin, stdout and stderr\n")
		handler.logMu.Lock()
		handler.opt.Log = io.Discard
		handler.logMu.Unlock()
		stdout = io.Discard
		if err := closeStdioFiles(); err != nil {
			return 1
		}
	}
	go func() {
		<-ctx.Done()
		fmt.Fprintf(stdout, "fakellm: stopping\n")
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stdout, "fakellm: fatal: %v\n", err)
		return 1
	}
	return 0
}

// helperSleep is how long the helper --spawn-detached starts sleeps.
const helperSleep = 600 * time.Second

// parseDecay reads --rate-decay TO,TAU: a rate from 0 and a time constant
// above 0, both finite.
func parseDecay(v string) (Decay, error) {
	to, tau, ok := strings.Cut(v, ",")
	d := Decay{}
	var err1, err2 error
	d.To, err1 = strconv.ParseFloat(strings.TrimSpace(to), 64)
	d.Tau, err2 = strconv.ParseFloat(strings.TrimSpace(tau), 64)
	if !ok || err1 != nil || err2 != nil || !(d.To >= 0) || !(d.Tau > 0) || math.IsInf(d.To, 0) || math.IsInf(d.Tau, 0) {
		return Decay{}, fmt.Errorf("want TO,TAU: the rate it settles at, tok/s from 0, and its time constant in requests, above 0 (57,5)")
	}
	return d, nil
}
