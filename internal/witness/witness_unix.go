//go:build !windows

package witness

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// noProc says the OS has no proc file system to read the serve's
// processes from: false here, where /proc is read.
const noProc = false

// CharDevice is the device numbers of the character device name is
// (stat, following links); ok is false for anything else.
func CharDevice(name string) (rdev uint64, ok bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		return 0, false
	}
	return st.Rdev, true
}

// Alive is whether pid runs, asked of the kernel (kill with signal 0):
// another user's process answers EPERM, and runs.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// toolGroup puts a vendor tool in a process group of its own, killed
// whole when its time is up: as internal/energy runs the same tools for
// power, gone with the gate.
func toolGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// toolLeft kills what is left of a tool's group once it exited, and
// reports whether anything was.
func toolLeft(cmd *exec.Cmd) bool {
	if cmd.Process == nil {
		return false
	}
	return killGroup(cmd.Process.Pid)
}

// LoadedModules is the Windows reading of a process's modules: none here,
// where the maps of /proc are read.
func LoadedModules(pid int) ([]string, error) {
	return nil, errors.ErrUnsupported
}

// SystemAdapters is the kernel's adapter statistics: none here (the DRM
// client usage stats of /proc/PID/fdinfo are read instead).
func SystemAdapters() Adapters { return nil }

// killGroup kills what is left of a tool's process group once the tool
// is reaped (its pid, the group's id, is not taken again while the group
// has a member), and reaps what of it came back to the gate, a child
// subreaper, for a second at most (a process in the driver's
// uninterruptible sleep dies when it leaves it). It reports whether a
// process of the group was left running: a zombie the gate holds is
// reaped first, and is none.
func killGroup(pgid int) bool {
	reapGroup(pgid)
	if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
		return false
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !reapGroup(pgid); time.Sleep(5 * time.Millisecond) {
	}
	return true
}

// reapGroup reaps the gate's exited children of group pgid, and reports
// whether none of the group is the gate's child any more (ECHILD).
func reapGroup(pgid int) bool {
	for {
		pid, err := syscall.Wait4(-pgid, nil, syscall.WNOHANG, nil)
		if err != nil {
			return true
		}
		if pid == 0 {
			return false // one runs still
		}
	}
}
