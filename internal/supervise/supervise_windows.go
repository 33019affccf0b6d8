// Package supervise is, on Linux, the process between the gate and the
// serve (see supervise_linux.go). On Windows there is none: the gate's own
// process starts the serve suspended, puts it in a kill-on-close Job Object
// whose only handle it holds, and resumes it (internal/serve). A gate that
// dies, killed or not, closes that handle, and the kernel ends everything
// in the job. What is here on Windows is only what the gate's command line
// shares with Linux: the supervise command (which says there is none) and
// the containment's name.
package supervise

import (
	"fmt"
	"io"
)

// Mechanisms that hold a serve's tree, in the order "auto" tries them: on
// Windows, the Job Object alone.
var Mechanisms = []string{"job"}

// Main is the supervisor's command, which Windows does not have: it says so
// and returns 2.
func Main(args []string, getenv func(string) string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "supervise: there is no supervisor on Windows: the gate holds the serve in a Job Object itself")
	return 2
}

// Available says why mechanism m cannot hold a serve here; nil when it can.
// A Job Object can always be made on the Windows versions Go supports
// (Windows 10 and later, where jobs nest); Start says so should it fail.
func Available(m string) error {
	return CheckContain(m)
}
