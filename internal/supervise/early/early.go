// Package early runs the supervisor (package supervise) from an init, when
// the binary was started as one ("BINARY supervise ..."), so that it starts
// without the rest of the binary's packages being initialized.
//
// The gate starts each serve's supervisor as its own binary in another mode,
// and waits for it before the serve is spawned. Go initializes a package
// once its imports are, the first in the order of their import paths
// among those ready: this init runs once supervise and what it imports are
// ready, before net/http, TLS, the GitHub client, regexp and most of the
// gate's own packages, which the supervisor never uses (a few that import
// little, and sort before this one, come first: internal/agree, the
// standard library's crypto). "BIN supervise" starts and exits some 4-5 ms
// sooner so (docs/benchmarks.md), on the path from the gate's start to the
// serve's.
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
