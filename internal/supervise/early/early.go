// Package early runs the supervisor (package supervise) from an init, when
// the binary was started as one ("BINARY supervise ..."), so that it starts
// without the rest of the binary's packages being initialized.
//
// The gate starts each serve's supervisor as its own binary in another mode,
// and waits for it before the serve is spawned. Go initializes a package
// once its imports are, in the order of their import paths: this init runs
// once supervise and what it imports are ready, before net/http, TLS, the
// GitHub client, regexp and the gate's own packages, which the supervisor
// never uses. Its start to its first line of work is some 5 ms shorter so
// (docs/benchmarks.md), on the path from the gate's start to the serve's.
//
// A command whose binary is its own supervisor imports it, for its init
// only:
//
//	import _ "github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/early"
//
// Nothing the supervisor calls can reach a package that is not initialized
// yet: Go initializes every package an init can call (its imports, and
// theirs) before it.
package early

import (
	"os"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == supervise.Command {
		os.Exit(supervise.Main(os.Args[2:], os.Getenv, os.Stderr))
	}
}
