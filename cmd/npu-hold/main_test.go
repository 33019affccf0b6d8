package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/scripttest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"npu-hold": func() { os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)) },
		"procs":    func() { os.Exit(scripttest.Procs()) },
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, scripts("testdata/script"))
}

// TestRootScripts are the scripts that play another user (files made with
// chown): they run as root only.
func TestRootScripts(t *testing.T) {
	scripttest.NeedRoot(t)
	testscript.Run(t, scripts("testdata/rootscript"))
}

func scripts(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup:               scripttest.Setup,
		Condition:           scripttest.Condition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":     scripttest.Exits,
			"waitfor":   scripttest.WaitFor,
			"killgroup": scripttest.KillGroup,
			"noproc":    scripttest.NoProc,
			"killproc":  scripttest.KillProc,
			"signal":    scripttest.Signal,
		},
	}
}
