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
	"syscall"
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
// serve with a stream open does).
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
		ignoreTerm  = fs.Bool("ignore-term", false, "ignore SIGTERM (a serve that will not stop)")
		detach      = fs.Bool("spawn-detached", false, "start a helper in a session of its own that sleeps, as a serve's helper might")
		closeStdio  = fs.Bool("close-stdio", false, "close stdin, stdout and stderr once listening")
		unlock      = fs.Bool("unlock-inherited", false, "at start, flock(LOCK_UN) every regular file it inherited from fd 3 on (a device ticket's lock, if it has one), as a hostile serve can")
		stopParent  = fs.Bool("stop-parent", false, "once listening, stop its parent with SIGSTOP (its supervisor), as a hostile serve can")
		holdDevice  = fs.String("hold-device", "", "open this path at start and hold it open, as a serve holds its device node")
		mapLibrary  = fs.String("map-library", "", "map this file at start and keep it mapped, as a serve maps its backend library")
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
	if *detach {
		if err := spawnDetached(opt.Model); err != nil {
			fmt.Fprintf(stderr, "fakellm: spawn: %v\n", err)
			return 1
		}
	}
	sigs := []os.Signal{syscall.SIGINT}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		sigs = append(sigs, syscall.SIGTERM)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
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
		ppid := os.Getppid()
		fmt.Fprintf(stdout, "fakellm: stopping its parent, pid %d (SIGSTOP)\n", ppid)
		syscall.Kill(ppid, syscall.SIGSTOP)
	}
	if *closeStdio {
		// As a daemon does: close stdin, stdout and stderr, and put
		// /dev/null in their place, so no socket takes their numbers.
		fmt.Fprintf(stdout, "fakellm: closing stdin, stdout and stderr\n")
		handler.logMu.Lock()
		handler.opt.Log = io.Discard
		handler.logMu.Unlock()
		stdout = io.Discard
		for fd := range 3 {
			syscall.Close(fd)
		}
		for range 3 {
			if _, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
				return 1
			}
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

// unlockInherited unlocks (flock LOCK_UN) each file of a path open from fd
// 3 up, and says which: a lock taken through a shared open file is dropped
// for every process that shares it. (The runtime's own descriptors, pidfds
// and the like, have no path.)
func unlockInherited(log io.Writer) {
	n := 0
	for fd := 3; fd < 256; fd++ {
		var st syscall.Stat_t
		path, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil || !strings.HasPrefix(path, "/") || syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		if err := syscall.Flock(fd, syscall.LOCK_UN); err == nil {
			fmt.Fprintf(log, "fakellm: unlocked fd %d (%s)\n", fd, path)
			n++
		}
	}
	fmt.Fprintf(log, "fakellm: %d open file(s) unlocked\n", n)
}

// spawnDetached starts a shell that sleeps in a session of its own, the way
// a serve's helper escapes its parent's process group. Its command line
// names the model, so tests can look for it.
func spawnDetached(model string) error {
	attr := &os.ProcAttr{Files: []*os.File{nil, nil, nil}, Sys: &syscall.SysProcAttr{Setsid: true}}
	p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", "sleep 600; : helper of " + model}, attr)
	if err != nil {
		return err
	}
	return p.Release()
}

// mapFile maps the first page of a file executable and keeps it mapped,
// as the dynamic loader maps a library's code, populated, as running the
// code faults it in: the witnesses count a backend only as an executable
// mapping that holds a page of its file.
func mapFile(file string) (unmap func(), err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, os.Getpagesize(), syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	return func() { syscall.Munmap(b) }, nil
}

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
