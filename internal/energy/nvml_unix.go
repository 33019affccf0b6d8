//go:build !windows

package energy

import (
	"os/exec"
	"syscall"
	"time"
)

// endsWhole makes a vendor tool's command end whole when its context ends:
// in its own process group, killed as a group (a tool that is a wrapper
// script runs the real one as its child, which holds the output pipe and
// may hang with a wedged driver), and its pipes let go of a second later
// should a descendant have left the group. Pdeathsig: gone with the gate.
func endsWhole(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
}
