package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/scripttest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"release-sums": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

func TestScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds")
	}
	// The scripts build with go: the same toolchain and caches as this test.
	goenv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOPATH", "GOMODCACHE", "GOROOT"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		goenv[k] = strings.TrimSpace(string(out))
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			for k, v := range goenv {
				env.Setenv(k, v)
			}
			return scripttest.Setup(env)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits": scripttest.Exits,
		},
	})
}
