// Command npu-hold is the runner-side agent that gives one process at a time
// a device: an exclusive ticket, first come first served, shared by every
// runner instance and person on the machine, and released by the kernel when
// its holder dies.
//
//	npu-hold [--device npu] [--wait 30m] [--] CMD ARGS...   run CMD holding the device
//	npu-hold status [--json]                                who holds it, who waits
//	npu-hold doctor                                         is the device usable here
package main

import (
	"os"

	// The supervisor runs from its init, before the packages it does not use.
	_ "github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/early"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
