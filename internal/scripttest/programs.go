package scripttest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

// The programs the scripts run, each built as a release is.
var programs = []release.Command{
	// The gate, as a runner runs it.
	{Name: "npu-serve-smoke", Pkg: "./cmd/action"},
	// The simulated serve.
	{Name: "fakellm", Pkg: "./internal/fakellm/cmd/fakellm"},
}

var built struct {
	once sync.Once
	dir  string
	err  error
}

// Programs builds the gate (npu-serve-smoke) and the simulated serve
// (fakellm) the first time it is called, puts their directory first on
// PATH, so that every command of the test binary finds them there, and
// returns the directory (a script's PATH, taken before, needs it too). root
// is the module's root. RemovePrograms removes them once the tests are
// done.
//
// They are built as a release is (internal/release.Build: no cgo, no race
// detector), so the scripts run the gate a runner runs, the binary whose
// stages BenchmarkGateBinaryStages times; the race detector watches the
// same code in the in-process tests (internal/gate, internal/serve,
// internal/supervise, internal/publish and cmd/action's TestRunInActions).
// A -race binary takes a tenth of a second of CPU to start, and a script's
// gate run is three processes (the gate, its supervisor, the serve): the
// scripts' hundreds of runs spent half their time starting the race
// runtime. They share the release build's cache.
func Programs(root string) (string, error) {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "npu-serve-smoke-programs")
		if err != nil {
			built.err = err
			return
		}
		for _, c := range programs {
			if err := release.Build(context.Background(), root, c, "test", runtime.GOARCH, filepath.Join(dir, c.Name)); err != nil {
				os.RemoveAll(dir)
				built.err = err
				return
			}
		}
		built.dir = dir
		built.err = os.Setenv("PATH", dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	})
	return built.dir, built.err
}

// RemovePrograms removes what Programs built, if anything.
func RemovePrograms() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}
