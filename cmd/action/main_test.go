package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"npu-serve-smoke": func() {
			os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
		},
		"fakellm": func() { os.Exit(fakellm.Command(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":  exits,
			"listen": listen,
		},
	})
}

// exits N CMD ARGS... runs CMD and fails unless it exits with status N.
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not a number", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// listen VAR holds a free loopback port open for the rest of the script and
// puts its number in $VAR.
func listen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: listen VAR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.Fatalf("listen: %v", err)
	}
	ts.Defer(func() { ln.Close() })
	ts.Setenv(args[0], strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}
