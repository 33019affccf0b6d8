// Command fakellm is the simulated serve on its own, for the end-to-end
// tests: the same serve as `npu-serve-smoke fakellm`, built without the
// race detector and without the gate, so that the hundreds of serves the
// scripts start each start in milliseconds (a -race binary takes a tenth
// of a second to start, and paces its stream through the detector).
package main

import (
	"os"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
)

func main() {
	os.Exit(fakellm.Command(os.Args[1:], os.Stdout, os.Stderr))
}
