package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serveenv"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// Exit codes of npu-hold itself; a command run under the ticket returns its
// own.
const (
	exitOK      = 0
	exitFail    = 1
	exitUsage   = 2
	exitTimeout = 75 // EX_TEMPFAIL: the device stayed busy past --wait
)

func usage() string {
	return `usage:
  npu-hold [--device npu] [--count 1] [--wait 30m] [--lock-dir DIR] [--pools FILE]
           [--env NAME=VALUE]... [--env-pass NAME]... [--] CMD ARGS...
        run CMD holding the device's ticket (or count devices of the pool); returns CMD's
        exit status. CMD gets NPU_HOLD_DEVICES, and the pool's vendor variable. Inside a
        GitHub Actions step CMD's environment is an allow-list (no token, input or file
        command of the runner) with --env and --env-pass; elsewhere it is npu-hold's own.
  npu-hold status [--device npu] [--json]
        who holds the device (every device of a pool), since when, and who waits;
        removes a stale ~/NPU-TOKEN (one whose ticket is no longer held)
  npu-hold doctor [--device npu]
        check the device nodes, driver, firmware, memlock limit, lock directory and pools

The lock directory is $NPU_HOLD_DIR, else ` + hold.DefaultDir() + `.
Pools are declared in $NPU_HOLD_POOLS, else ` + hold.DefaultPools + `.
While held, ~/NPU-TOKEN holds the holder's facts (a file already there that is not a
stale token is left as it is).
`
}

type env struct {
	getenv         func(string) string
	stdin          *os.File
	stdout, stderr io.Writer
	// parseOnly stops each command once its flags and arguments are
	// parsed, with exitOK: the docs test reads every npu-hold command line
	// in README.md and docs/ with the real flag sets.
	parseOnly bool
}

func run(args []string, getenv func(string) string, stdin *os.File, stdout, stderr io.Writer) int {
	e := &env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	return e.command(args)
}

// command runs the subcommand args names, else CMD under the ticket.
func (e *env) command(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "status":
			return e.status(args[1:])
		case "doctor":
			return e.doctor(args[1:])
		case "-h", "-help", "--help", "help":
			fmt.Fprint(e.stdout, usage())
			return exitOK
		}
	}
	return e.hold(args)
}

// common flags of every subcommand.
type common struct {
	device  string
	lockDir string
	pools   string
	count   int
}

func (e *env) flags(name string, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet("npu-hold "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, usage()) }
	dir := e.getenv("NPU_HOLD_DIR")
	if dir == "" {
		dir = hold.DefaultDir()
	}
	fs.StringVar(&c.device, "device", "npu", "the device")
	fs.StringVar(&c.lockDir, "lock-dir", dir, "the shared lock directory (mode 1777)")
	pools := e.getenv("NPU_HOLD_POOLS")
	if pools == "" {
		pools = hold.DefaultPools
	}
	fs.StringVar(&c.pools, "pools", pools, "the file declaring the host's device pools")
	c.count = 1
	return fs
}

// checkLockDir refuses a relative lock directory, naming where it came
// from: --lock-dir when given, else NPU_HOLD_DIR.
func (e *env) checkLockDir(fs *flag.FlagSet, c common) error {
	from := "NPU_HOLD_DIR"
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "lock-dir" {
			from = "--lock-dir"
		}
	})
	return hold.CheckDirPath(from, c.lockDir)
}

// device is the ticket c asks for: bad input when the device's name, the
// pools file or the count is wrong.
func (e *env) device(c common) (*hold.Device, error) {
	if err := hold.CheckName(c.device); err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	pools, err := hold.LoadPools(c.pools)
	if err != nil {
		return nil, err
	}
	pool, err := pools.Resolve(c.device, c.count, "--count")
	if err != nil {
		return nil, err
	}
	return &hold.Device{Dir: c.lockDir, Name: c.device, Pool: pool, Count: c.count}, nil
}

func (e *env) hold(args []string) int {
	var c common
	fs := e.flags("", &c)
	wait := fs.Duration("wait", 30*time.Minute, "how long to wait for the device")
	fs.IntVar(&c.count, "count", 1, "how many devices of the pool")
	tokenFile := e.tokenFlag(fs)
	var set, pass []string
	fs.Func("env", "NAME=VALUE: a variable the command gets (repeatable); inside a GitHub Actions step it starts with the allow-list of docs/reference.md, never a secret or file command of the runner", func(v string) error { set = append(set, v); return nil })
	fs.Func("env-pass", "NAME: a variable of npu-hold's environment the command gets too inside a GitHub Actions step, if set (repeatable)", func(v string) error { pass = append(pass, v); return nil })
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if err := e.checkLockDir(fs, c); err != nil {
		fmt.Fprintf(e.stderr, "npu-hold: bad input, nothing was started:\n  %s\n", err)
		return exitUsage
	}
	if err := serveenv.Check(set, pass, "--env", "--env-pass"); err != nil {
		fmt.Fprintf(e.stderr, "npu-hold: bad input, nothing was started:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return exitUsage
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		fmt.Fprintf(e.stderr, "npu-hold: no command to run; give it after the flags: npu-hold -- CMD ARGS...\n")
		return exitUsage
	}
	if *wait <= 0 {
		fmt.Fprintf(e.stderr, "npu-hold: --wait %v: pass a positive duration such as 30m\n", *wait)
		return exitUsage
	}
	if e.parseOnly {
		return exitOK
	}
	d, err := e.device(c)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-hold: bad input, nothing was started:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return exitUsage
	}
	d.Command = strings.Join(cmd, " ")
	d.TokenFile = e.tokenFile(fs, *tokenFile)
	d.RunURL = runURL(e.getenv)
	d.Log = e.stderr

	// INT and TERM while waiting stop the wait; while CMD runs, they go to it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	stopWaiting := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-stopWaiting:
		}
	}()
	t, err := d.Acquire(ctx)
	close(stopWaiting)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-hold: %v\n", err)
		var te *hold.TimeoutError
		if errors.As(err, &te) {
			return exitTimeout
		}
		return exitFail
	}
	defer t.Release()
	if d.Pool == nil {
		fmt.Fprintf(e.stderr, "npu-hold: %s held (ticket %d)\n", c.device, t.Facts.Ticket)
	} else {
		fmt.Fprintf(e.stderr, "npu-hold: %s of pool %s held (ticket %d)\n", strings.Join(t.Names(), ","), c.device, t.Facts.Ticket)
	}

	if err := serve.BecomeSubreaper(); err != nil {
		fmt.Fprintf(e.stderr, "npu-hold: warning: not a child subreaper (%v): detached helpers may escape the sweep\n", err)
	}
	// Inside a step the command gets the allow-list, never the step's
	// token, inputs or file commands; at a person's shell, all of it.
	environ := append(append(os.Environ(), set...), t.Env()...)
	if e.getenv("GITHUB_ACTIONS") == "true" {
		environ = serveenv.Build(os.Environ(), set, pass, t.Env())
	}
	opts := serve.Options{Argv: cmd, Env: environ, Stdin: e.stdin, Stdout: asFile(e.stdout), Stderr: asFile(e.stderr), ExtraFiles: t.Files()}
	if e.stdin != nil && isTerminal(e.stdin) {
		opts.Foreground = true
	}
	p, err := serve.Start(opts)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-hold: %v\n", err)
		return 127
	}
	for {
		select {
		case sig := <-sigs:
			signalGroup(p.PID(), sig)
			continue
		case <-p.Done():
		}
		break
	}
	if opts.Foreground {
		takeTerminalBack(e.stdin)
	}
	st := p.Stop(5 * time.Second)
	if st.Swept > 0 || st.Survivors > 0 {
		fmt.Fprintf(e.stderr, "npu-hold: after %s: %d left behind and killed, %d survived\n", cmd[0], st.Swept, st.Survivors)
	}
	// What could not be ended leaves the device in doubt: said by status
	// and to the next holder while it runs.
	if st.Survivors > 0 {
		for _, l := range st.Left {
			fmt.Fprintf(e.stderr, "npu-hold: survivor %s\n", console.Text(l))
		}
		if err := t.NoteSurvivors(hold.ParseSurvivors(st.Left)); err != nil {
			fmt.Fprintf(e.stderr, "npu-hold: warning: %v\n", err)
		} else {
			fmt.Fprintf(e.stderr, "npu-hold: %s marked as maybe unhealthy: npu-hold status and the next holder say so while they run\n", c.device)
		}
	}
	// The command runs as this user, and can take the ticket away (its
	// holding file's name); whoever relies on the hold is told.
	if err := t.Held(); err != nil {
		fmt.Fprintf(e.stderr, "npu-hold: warning: %s was not held to the end: %v\n", c.device, err)
	}
	if code := p.ExitCode(); code >= 0 {
		return code
	}
	if sig := p.Signal(); sig != 0 {
		return 128 + int(sig)
	}
	return exitFail
}

func (e *env) status(args []string) int {
	var c common
	fs := e.flags("status", &c)
	asJSON := fs.Bool("json", false, "print JSON")
	tokenFile := e.tokenFlag(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if e.parseOnly {
		return exitOK
	}
	if err := e.checkLockDir(fs, c); err != nil {
		fmt.Fprintf(e.stderr, "npu-hold status: bad input:\n  %s\n", err)
		return exitUsage
	}
	d, err := e.device(c)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-hold status: bad input:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return exitUsage
	}
	st, err := d.Status()
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-hold status: %v\n", err)
		return exitFail
	}
	e.clearStaleToken(e.tokenFile(fs, *tokenFile))
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(e.stdout, string(console.JSON(b)))
		return exitOK
	}
	if d.Pool != nil {
		e.poolStatus(st)
		return exitOK
	}
	switch {
	case st.Holder != nil:
		fmt.Fprintf(e.stdout, "%s: held by %s\n", st.Device, st.Holder)
	case st.Held:
		fmt.Fprintf(e.stdout, "%s: held, by a process whose ticket holder is gone\n", st.Device)
	default:
		fmt.Fprintf(e.stdout, "%s: free\n", st.Device)
	}
	if st.Held && len(st.Lockers) > 0 {
		fmt.Fprintf(e.stdout, "  the lock is open in pids %s\n", strings.Trim(fmt.Sprint(st.Lockers), "[]"))
	}
	for i, w := range st.Queue {
		fmt.Fprintf(e.stdout, "  %d. %s, waiting since %s\n", i+1, w, w.QueuedAt().Format("15:04:05"))
	}
	e.unhealthy(st)
	return exitOK
}

// unhealthy says which devices may be unhealthy: a stop under an earlier
// ticket left processes that could not be ended, and they still run.
func (e *env) unhealthy(st *hold.Status) {
	for _, u := range st.Unhealthy {
		fmt.Fprintf(e.stdout, "  %s: %s; if it does not go, reboot the machine\n", console.Text(u.Device), u)
	}
}

// poolStatus prints every device of a pool, its holder, and the waiters.
func (e *env) poolStatus(st *hold.Status) {
	held := 0
	for _, d := range st.Devices {
		if d.Holder != nil {
			held++
		}
	}
	fmt.Fprintf(e.stdout, "%s: pool of %d, %d held, %d waiting\n", st.Device, len(st.Devices), held, len(st.Queue))
	for _, d := range st.Devices {
		if d.Holder != nil {
			fmt.Fprintf(e.stdout, "  %s: held by %s\n", d.Name, d.Holder)
		} else {
			fmt.Fprintf(e.stdout, "  %s: free\n", d.Name)
		}
	}
	if len(st.Lockers) > 0 {
		fmt.Fprintf(e.stdout, "  the holders' tickets are open in pids %s\n", strings.Trim(fmt.Sprint(st.Lockers), "[]"))
	}
	for i, w := range st.Queue {
		fmt.Fprintf(e.stdout, "  %d. %s, %s, waiting since %s\n", i+1, w, devices(max(w.Count, 1)), w.QueuedAt().Format("15:04:05"))
	}
	e.unhealthy(st)
}

func devices(n int) string {
	if n == 1 {
		return "1 device"
	}
	return fmt.Sprintf("%d devices", n)
}

// tokenFlag is --token-file, ~/NPU-TOKEN unless said otherwise.
func (e *env) tokenFlag(fs *flag.FlagSet) *string {
	return fs.String("token-file", filepath.Join(e.getenv("HOME"), "NPU-TOKEN"), "the token file: the holder's facts while held, removed at release")
}

// tokenFile is the token file to use: none without a home, unless named.
func (e *env) tokenFile(fs *flag.FlagSet, path string) string {
	if e.getenv("HOME") == "" && !isSet(fs, "token-file") {
		return ""
	}
	return path
}

// clearStaleToken removes a token file whose ticket is no longer held (its
// holder was killed with SIGKILL), and says so.
func (e *env) clearStaleToken(path string) {
	if path == "" {
		return
	}
	f, err := hold.ClearStaleToken(path)
	switch {
	case err != nil:
		fmt.Fprintf(e.stderr, "npu-hold status: %s\n", console.Text(err.Error()))
	case f != nil:
		fmt.Fprintf(e.stderr, "npu-hold status: removed the stale token file %s: its ticket %d of %s (pid %d) is no longer held\n", console.Text(path), f.Ticket, f.Device, f.PID)
	}
}

func (e *env) doctor(args []string) int {
	var c common
	fs := e.flags("doctor", &c)
	root := fs.String("root", "/", "the filesystem root to look in")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if e.parseOnly {
		return exitOK
	}
	if err := e.checkLockDir(fs, c); err != nil {
		fmt.Fprintf(e.stderr, "npu-hold doctor: bad input:\n  %s\n", err)
		return exitUsage
	}
	failed := false
	checks := append(hold.Doctor(*root, c.lockDir, memlockLimit()), hold.CheckPools(c.lockDir, c.pools, c.device)...)
	checks = append(checks, energyChecks(filepath.Join(*root, "sys"))...)
	for _, ch := range checks {
		fmt.Fprintf(e.stdout, "%-5s %s\n", ch.Level, ch.What)
		failed = failed || ch.Level == "FAIL"
	}
	if failed {
		fmt.Fprintln(e.stdout, "unhealthy: fix the FAIL lines above")
		return exitFail
	}
	fmt.Fprintln(e.stdout, "healthy")
	return exitOK
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runURL is the Actions run the ticket is for, when there is one.
func runURL(getenv func(string) string) string {
	if getenv("GITHUB_RUN_ID") == "" || getenv("GITHUB_REPOSITORY") == "" {
		return ""
	}
	server := getenv("GITHUB_SERVER_URL")
	if server == "" {
		server = "https://github.com"
	}
	return fmt.Sprintf("%s/%s/actions/runs/%s", server, getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID"))
}

func asFile(w io.Writer) *os.File {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return nil
}

// energyChecks say which energy sensors the gate's --energy can read here,
// as this user, and what to change where one cannot be read. None is a
// warning, never a failure: the energy row is then "unavailable".
func energyChecks(sys string) []hold.Check {
	tools := vendortool.Find(os.Environ())
	env := energy.Env{Sys: sys, NVML: energy.OpenNvidiaSMI(tools), Tools: tools}
	var cs []hold.Check
	readable := 0
	for _, f := range energy.Survey(env) {
		if f.Why == "" {
			readable++
			cs = append(cs, hold.Check{Level: "ok", What: fmt.Sprintf("energy: %s can be read (%s, %s: %s)", f.Info.Name, f.Info.Quantity, f.Info.Method, console.Text(f.Info.Boundary))})
			continue
		}
		cs = append(cs, hold.Check{Level: "info", What: fmt.Sprintf("energy: %s: %s", f.Kind, console.Text(f.Why))})
	}
	if readable == 0 {
		cs = append(cs, hold.Check{Level: "warn", What: "energy: no sensor this user can read: the gate's energy row will say unavailable; a sensor of the runner's own can be named with --energy counter:PATH or power:PATH (docs/measuring.md)"})
	}
	return cs
}
