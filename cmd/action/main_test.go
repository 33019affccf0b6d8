package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/scripttest"
)

func TestMain(m *testing.M) {
	// The gate run in this process (TestRunInActions, a benchmark's
	// run(...)) starts its supervisor as this binary, by this binary's own
	// name: main.go's import of supervise/early runs it, as in the gate's.
	// The gate and the simulated serve the scripts run are release builds
	// (scripttest.Programs), made when a test first needs them; procs is
	// this test binary.
	testscript.Main(removingPrograms{m}, map[string]func(){
		"procs": func() { os.Exit(scripttest.Procs()) },
	})
}

// removingPrograms runs the tests, then removes the scripts' programs.
type removingPrograms struct{ m *testing.M }

func (r removingPrograms) Run() int {
	defer scripttest.RemovePrograms()
	return r.m.Run()
}

// needPrograms puts the released gate and the simulated serve on PATH,
// building them the first time.
func needPrograms(t testing.TB) {
	t.Helper()
	if _, err := scripttest.Programs("../.."); err != nil {
		t.Fatalf("building the scripts' programs: %v", err)
	}
}

func TestScripts(t *testing.T) {
	needDumpable(t)
	testscript.Run(t, scripts("testdata/script"))
}

// needDumpable fails where a test before left this process not dumpable: a
// gate run here (run(...)) that starts a serve hides its process from the
// serve (PR_SET_DUMPABLE 0), and the scripts' gates, run as an ordinary
// user, could then not see the sockets this process listens on (listen,
// stranger), and would say so as of another user's process. Root sees
// them all the same, so only this says it there.
func needDumpable(t *testing.T) {
	t.Helper()
	if d, err := dumpable(); err != nil || !d {
		t.Fatalf("this test process is not dumpable (dumpable %v, %v): a test before ran a gate here that started a serve and did not make it dumpable again (TestRunInActions does, in its cleanup)", d, err)
	}
}

// TestRootScripts are the scripts that need root: the serve held in a
// cgroup root makes.
func TestRootScripts(t *testing.T) {
	scripttest.NeedRoot(t)
	testscript.Run(t, scripts("testdata/rootscript"))
}

func scripts(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			dir, err := scripttest.Programs("../..")
			if err != nil {
				return fmt.Errorf("building the scripts' programs: %v", err)
			}
			env.Setenv("PATH", dir+string(filepath.ListSeparator)+env.Getenv("PATH"))
			return scripttest.Setup(env)
		},
		Condition: scripttest.Condition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":         scripttest.Exits,
			"listen":        scripttest.Listen,
			"fakegithub":    fakeGitHub,
			"githublog":     githubLog,
			"githubrun":     githubRun,
			"githubcomment": githubComment,
			"githubcheck":   githubCheck,
			"consolesafe":   consoleSafe,
			"setenvfile":    setEnvFile,
			"waitfor":       scripttest.WaitFor,
			"killgroup":     scripttest.KillGroup,
			"noproc":        scripttest.NoProc,
			"stranger":      stranger,
			"killproc":      scripttest.KillProc,
		},
	}
}

// fakeGitHubs holds each script's fake GitHub API.
var fakeGitHubs sync.Map // *testscript.TestScript: *fakegithub.Server

// fakeGitHub [-pr N -head SHA] [-comments N] [-fail METHOD:PATH-RE:STATUS:TIMES[:RETRY-AFTER]]...
// starts a fake GitHub API for the rest of the script, accepting the token
// ghs_fake, and points GITHUB_API_URL at it.
func fakeGitHub(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("fakegithub", flag.ContinueOnError)
	pr := fs.Int("pr", 0, "a pull request that exists")
	head := fs.String("head", "", "its head commit")
	comments := fs.Int("comments", 0, "comments by others on it")
	var fails []string
	fs.Func("fail", "a fault", func(s string) error { fails = append(fails, s); return nil })
	if neg || fs.Parse(args) != nil {
		ts.Fatalf("usage: fakegithub [-pr N -head SHA] [-comments N] [-fail METHOD:PATH-RE:STATUS:TIMES[:RETRY-AFTER]]")
	}
	gh := fakegithub.New("ghs_fake")
	if *pr != 0 {
		gh.SetPull(*pr, *head)
		gh.AddComments(*pr, *comments, func(i int) string { return "a comment " + strconv.Itoa(i) })
	}
	for _, f := range fails {
		p := strings.Split(f, ":")
		if len(p) < 4 {
			ts.Fatalf("fakegithub -fail %q: want METHOD:PATH-RE:STATUS:TIMES[:RETRY-AFTER]", f)
		}
		status, _ := strconv.Atoi(p[2])
		times, _ := strconv.Atoi(p[3])
		fault := fakegithub.Fault{Method: p[0], Path: regexp.MustCompile(p[1]), Status: status, Times: times}
		if len(p) > 4 {
			fault.Header = map[string]string{"Retry-After": p[4]}
		}
		gh.Fail(fault)
	}
	srv := httptest.NewServer(gh)
	ts.Defer(srv.Close)
	ts.Setenv("GITHUB_API_URL", srv.URL)
	fakeGitHubs.Store(ts, gh)
}

func fakeOf(ts *testscript.TestScript) *fakegithub.Server {
	gh, ok := fakeGitHubs.Load(ts)
	if !ok {
		ts.Fatalf("no fakegithub in this script")
	}
	return gh.(*fakegithub.Server)
}

// githublog FILE writes the fake's calls so far to FILE, one a line.
func githubLog(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: githublog FILE")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(fakeOf(ts).Log()), 0o644))
}

// githubcomment PR FILE writes the bodies of PR's comments to FILE.
func githubComment(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: githubcomment PR FILE")
	}
	pr, _ := strconv.Atoi(args[0])
	var b strings.Builder
	for _, c := range fakeOf(ts).Comments(pr) {
		b.WriteString(c.Body + "\n")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(b.String()), 0o644))
}

// githubcheck FILE writes each check run's name, conclusion, title and
// summary to FILE.
func githubCheck(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: githubcheck FILE")
	}
	var b strings.Builder
	for _, c := range fakeOf(ts).CheckRuns() {
		out, _ := c["output"].(map[string]any)
		fmt.Fprintf(&b, "name: %v\nconclusion: %v\ntitle: %v\nsummary:\n%v\n", c["name"], c["conclusion"], out["title"], out["summary"])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(b.String()), 0o644))
}

// workflowCommand is a workflow command the gate means to issue: the
// runner's stop and the resume of its random token, the mask of the test's
// token, and annotations.
var workflowCommand = regexp.MustCompile(`^::(stop-commands::npu-serve-smoke-[0-9a-f]{32}|npu-serve-smoke-[0-9a-f]{32}::|add-mask::ghs_fake|(error|warning|notice)( [^:]*)?::.*)$`)

// consolesafe checks the last command's stdout and stderr as a GitHub
// Actions runner reads them (actions/runner, ActionCommand.cs): no raw
// control character but the line break, and no raw format character (bidi
// overrides and isolates, zero-width characters), which reorder or hide
// what a reader of the job's log sees; no "##[" (the runner's first form
// of commands, read anywhere in a line); and every line that starts with
// "::" after white space (the second form) a command the gate means.
func consoleSafe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: consolesafe")
	}
	for _, stream := range []string{"stdout", "stderr"} {
		for i, line := range strings.Split(ts.ReadFile(stream), "\n") {
			if strings.ContainsFunc(line, func(c rune) bool { return unicode.IsControl(c) || c == '\u2028' || c == '\u2029' }) || !utf8.ValidString(line) {
				ts.Fatalf("%s line %d holds a raw control character: %q", stream, i+1, line)
			}
			if strings.ContainsFunc(line, func(c rune) bool { return unicode.Is(unicode.Cf, c) }) {
				ts.Fatalf("%s line %d holds a raw format character (bidi, zero-width): %q", stream, i+1, line)
			}
			if strings.Contains(line, "##[") {
				ts.Fatalf("%s line %d holds a workflow command (##[): %q", stream, i+1, line)
			}
			if v2 := strings.TrimLeftFunc(line, unicode.IsSpace); strings.HasPrefix(v2, "::") && !workflowCommand.MatchString(line) {
				ts.Fatalf("%s line %d is a workflow command the gate did not mean: %q", stream, i+1, line)
			}
		}
	}
}

// setenvfile NAME FILE sets NAME to FILE's content (which may hold line
// breaks, as a multi-line action input does).
func setEnvFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setenvfile NAME FILE")
	}
	ts.Setenv(args[0], ts.ReadFile(args[1]))
}

// stranger [-stall] FILE waits in the background for FILE to name a port,
// then listens on it and answers every request 200, as a stale server
// would; with -stall it answers health and never a request, and writes
// FILE.post "cut" when the client gives up on it (or, after a minute,
// "answered after a minute").
func stranger(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("stranger", flag.ContinueOnError)
	stall := fs.Bool("stall", false, "answer no request (POST): wait for the client to give up, a minute at most, and write FILE.post saying which")
	if neg || fs.Parse(args) != nil || fs.NArg() != 1 {
		ts.Fatalf("usage: stranger [-stall] FILE")
	}
	path := ts.MkAbs(fs.Arg(0))
	handler := func(w http.ResponseWriter, r *http.Request) {
		if !*stall || r.Method != http.MethodPost {
			return
		}
		// Read whole, so that the server watches the connection and
		// the request's context ends when the client closes it.
		io.Copy(io.Discard, r.Body)
		what := "answered after a minute\n"
		select {
		case <-r.Context().Done():
			what = "cut\n"
		case <-time.After(time.Minute):
		}
		os.WriteFile(path+".post", []byte(what), 0o644)
	}
	done := make(chan struct{})
	ts.Defer(func() { close(done) })
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			select {
			case <-done:
				return
			default:
			}
			b, err := os.ReadFile(path)
			port, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || perr != nil {
				continue
			}
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				return
			}
			srv := &http.Server{Handler: http.HandlerFunc(handler)}
			go srv.Serve(ln)
			<-done
			srv.Close()
			return
		}
	}()
}
