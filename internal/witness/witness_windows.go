//go:build windows

package witness

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/windows"
)

// noProc says the OS has no proc file system to read the serve's
// processes from: on Windows their loaded modules and the adapters'
// statistics are read instead (loaded.go).
const noProc = true

// CharDevice is never a device on Windows, which has no device nodes.
func CharDevice(name string) (rdev uint64, ok bool) { return 0, false }

// Alive is whether pid runs: a process this user may not open (another
// user's) runs.
func Alive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return errors.Is(err, windows.ERROR_ACCESS_DENIED)
	}
	defer windows.CloseHandle(h)
	var code uint32
	return windows.GetExitCodeProcess(h, &code) == nil && code == stillActive
}

// stillActive is GetExitCodeProcess's code for a process that runs
// (STILL_ACTIVE, STATUS_PENDING).
const stillActive = 259

// toolGroup leaves a vendor tool as exec runs it: killed when its time is
// up. Its own children are not followed on Windows (nvidia-smi starts
// none).
func toolGroup(cmd *exec.Cmd) {}

// toolLeft reports nothing left: see toolGroup.
func toolLeft(cmd *exec.Cmd) bool { return false }

// LoadedModules is the files process pid has loaded: its executable and
// DLLs, by full path, from a module snapshot
// (CreateToolhelp32Snapshot, TH32CS_SNAPMODULE|TH32CS_SNAPMODULE32: a
// 64-bit process's and, in a 32-bit process, its 32-bit modules too).
// A snapshot may fail with ERROR_BAD_LENGTH while the process loads a
// module, and is then taken again, a few times.
func LoadedModules(pid int) ([]string, error) {
	var snap windows.Handle
	var err error
	for range 8 {
		snap, err = windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPMODULE|windows.TH32CS_SNAPMODULE32, uint32(pid))
		if !errors.Is(err, windows.ERROR_BAD_LENGTH) {
			break
		}
	}
	switch {
	case errors.Is(err, windows.ERROR_INVALID_PARAMETER):
		// no such process: it exited since the tree was listed
		if !Alive(pid) {
			return nil, ErrGone
		}
		return nil, fmt.Errorf("module snapshot: %w", err)
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		return nil, fmt.Errorf("module snapshot: %w", fs.ErrPermission)
	case err != nil:
		return nil, fmt.Errorf("module snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	var me windows.ModuleEntry32
	me.Size = uint32(unsafe.Sizeof(me))
	var out []string
	for err = windows.Module32First(snap, &me); err == nil; err = windows.Module32Next(snap, &me) {
		out = append(out, windows.UTF16ToString(me.ExePath[:]))
		if len(out) > MaxModules {
			// one past the bound: the reader says it cut
			return out, nil
		}
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return out, fmt.Errorf("module list: %w", err)
	}
	return out, nil
}
