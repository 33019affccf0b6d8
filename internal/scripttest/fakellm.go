package scripttest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

// FakeLLMPkg is the simulated serve's own command.
const FakeLLMPkg = "./internal/fakellm/cmd/fakellm"

var fakeLLM struct {
	once sync.Once
	dir  string
	err  error
}

// FakeLLM builds the simulated serve as a program of its own, named
// fakellm, the first time it is called, puts its directory first on PATH,
// so that every serve command of the test binary finds it there, and
// returns the directory (a script's PATH, taken before, needs it too). It is built as a release is, without the race detector (a -race
// binary takes a tenth of a second to start, and the scripts start hundreds
// of serves), and shares the release build's cache. root is the module's
// root. RemoveFakeLLM removes it once the tests are done.
func FakeLLM(root string) (string, error) {
	fakeLLM.once.Do(func() {
		dir, err := os.MkdirTemp("", "npu-serve-smoke-fakellm")
		if err != nil {
			fakeLLM.err = err
			return
		}
		c := release.Command{Name: "fakellm", Pkg: FakeLLMPkg}
		if err := release.Build(context.Background(), root, c, "test", runtime.GOARCH, filepath.Join(dir, "fakellm")); err != nil {
			os.RemoveAll(dir)
			fakeLLM.err = err
			return
		}
		fakeLLM.dir = dir
		fakeLLM.err = os.Setenv("PATH", dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	})
	return fakeLLM.dir, fakeLLM.err
}

// RemoveFakeLLM removes what FakeLLM built, if anything.
func RemoveFakeLLM() {
	if fakeLLM.dir != "" {
		os.RemoveAll(fakeLLM.dir)
	}
}
