//go:build windows

package energy

import (
	"os/exec"
	"time"
)

// endsWhole lets a vendor tool's command end when its context ends: exec
// kills the tool, and its pipes are let go of a second later should a
// child of its own hold them. Windows has no process group to kill whole
// short of a job object; nvidia-smi starts no child.
func endsWhole(cmd *exec.Cmd) {
	cmd.WaitDelay = time.Second
}
