//go:build unix

package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The commands that hold the token (run, record, publish, report) are not
// dumpable from their start: their /proc/PID/environ and memory are then
// root's alone. A process a serve left behind, or the serve of another job
// on the same runner (two runners of one user on one machine), runs as
// this user, and read publish's and report's environment (they start no
// serve, and were never hidden), and the gate's before it started its
// serve. The simulated serve and judge stay dumpable: the witness reads
// a serve's /proc, and judge holds nothing.
func TestHideTokenCommands(t *testing.T) {
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) })
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"run"}, 0}, {[]string{"record", "--serve", "x"}, 0}, {[]string{"publish", "out"}, 0}, {[]string{"report", "runs/a"}, 0},
		{[]string{"judge", "out"}, 1}, {[]string{"fakellm"}, 1}, {[]string{"demo"}, 1}, {nil, 1},
	} {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := hideTokenCommand(tt.args); err != nil {
			t.Errorf("hideTokenCommand(%q) = %v", tt.args, err)
		}
		if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != tt.want {
			t.Errorf("after hideTokenCommand(%q), dumpable = %d, %v; want %d", tt.args, d, err, tt.want)
		}
	}
}

// dumpable says whether this process is dumpable (prctl PR_GET_DUMPABLE).
func dumpable() (bool, error) {
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return d == 1, err
}

// makeDumpable makes this process dumpable again.
func makeDumpable() { unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) }
