//go:build windows

package fakellm

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	kernel32                  = windows.NewLazySystemDLL("kernel32.dll")
	procSetConsoleCtrlHandler = kernel32.NewProc("SetConsoleCtrlHandler")
	procIsProcessInJob        = kernel32.NewProc("IsProcessInJob")
	procNtSuspendProcess      = windows.NewLazySystemDLL("ntdll.dll").NewProc("NtSuspendProcess")
)

// ignoreBreak is the console control handler of --ignore-term: it takes
// CTRL_BREAK_EVENT (the polite stop a Windows supervisor sends to the
// serve's process group) and does nothing with it, and passes every other
// event on, to Go's own handler, which makes CTRL_C_EVENT a SIGINT.
// signal.Ignore would not do: Go's handler ends the process on an event
// no channel wants.
var ignoreBreak = windows.NewCallback(func(event uintptr) uintptr {
	if event == windows.CTRL_BREAK_EVENT {
		return 1
	}
	return 0
})

// stopSignals are the signals that stop the serve. On Windows Go makes
// CTRL_C_EVENT and CTRL_BREAK_EVENT a SIGINT (os.Interrupt), and the
// console's close, a logoff or a shutdown a SIGTERM. With ignoreTerm
// CTRL_BREAK_EVENT is taken, before Go sees it, by a handler that ignores
// it (SetConsoleCtrlHandler: the handler added last is asked first), as
// a serve that will not stop does.
func stopSignals(ignoreTerm bool) []os.Signal {
	if ignoreTerm {
		procSetConsoleCtrlHandler.Call(ignoreBreak, 1)
	}
	return []os.Signal{os.Interrupt, syscall.SIGTERM}
}

// stopParentProcess suspends the serve's parent (its supervisor, or the
// gate where no supervisor stands between them) with NtSuspendProcess,
// Windows' SIGSTOP, and says whether it could.
func stopParentProcess(log io.Writer) {
	ppid := os.Getppid()
	fmt.Fprintf(log, "fakellm: stopping its parent, pid %d (NtSuspendProcess)\n", ppid)
	h, err := windows.OpenProcess(windows.PROCESS_SUSPEND_RESUME, false, uint32(ppid))
	if err != nil {
		fmt.Fprintf(log, "fakellm: its parent, pid %d, cannot be stopped: %v\n", ppid, err)
		return
	}
	defer windows.CloseHandle(h)
	if st, _, _ := procNtSuspendProcess.Call(uintptr(h)); st != 0 {
		fmt.Fprintf(log, "fakellm: its parent, pid %d, cannot be stopped: NTSTATUS %#x\n", ppid, st)
	}
}

// stdHandles are the kinds of standard handle: in, out, error.
var stdHandles = []uint32{windows.STD_INPUT_HANDLE, windows.STD_OUTPUT_HANDLE, windows.STD_ERROR_HANDLE}

// closeStdioFiles closes the standard handles (each once: two may be one)
// and puts a handle of the null device in their place.
func closeStdioFiles() error {
	var closed []windows.Handle
	for _, std := range stdHandles {
		h, err := windows.GetStdHandle(std)
		if err != nil || h == 0 || h == windows.InvalidHandle || slices.Contains(closed, h) {
			continue
		}
		windows.CloseHandle(h)
		closed = append(closed, h)
	}
	for _, std := range stdHandles {
		null, err := windows.CreateFile(windows.StringToUTF16Ptr("NUL"), windows.GENERIC_READ|windows.GENERIC_WRITE,
			windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0)
		if err != nil {
			return err
		}
		if err := windows.SetStdHandle(std, null); err != nil {
			return err
		}
	}
	return nil
}

// ticketByte is the byte npu-hold locks in a ticket on Windows (1 TiB in),
// the one a hostile serve that read its source would try to unlock.
const ticketByte = 1 << 40

// maxInheritedHandle bounds the handle values searched for inherited files:
// an inherited handle keeps its value in the parent, small in a gate.
const maxInheritedHandle = 1 << 16

// unlockInherited tries UnlockFileEx on every disk file handle this
// process has but the standard ones (inherited handles keep the values they
// had in the parent), over the whole file and over npu-hold's byte, and
// says what happened. A byte-range lock belongs to the handle and process
// that took it: a child's copy of the handle unlocks nothing, which is
// what it shows.
func unlockInherited(log io.Writer) {
	var std []windows.Handle
	for _, s := range stdHandles {
		if h, err := windows.GetStdHandle(s); err == nil {
			std = append(std, h)
		}
	}
	n := 0
	for v := uintptr(4); v < maxInheritedHandle; v += 4 {
		h := windows.Handle(v)
		if slices.Contains(std, h) {
			continue
		}
		if t, err := windows.GetFileType(h); err != nil || t != windows.FILE_TYPE_DISK {
			continue
		}
		path := finalPath(h)
		for _, r := range []struct{ off, n uint64 }{{0, math.MaxUint64}, {ticketByte, 1}} {
			ol := windows.Overlapped{Offset: uint32(r.off), OffsetHigh: uint32(r.off >> 32)}
			if err := windows.UnlockFileEx(h, 0, uint32(r.n), uint32(r.n>>32), &ol); err != nil {
				fmt.Fprintf(log, "fakellm: handle %#x (%s), bytes %d+%d: not unlocked: %v\n", v, path, r.off, r.n, err)
				continue
			}
			fmt.Fprintf(log, "fakellm: unlocked handle %#x (%s), bytes %d+%d\n", v, path, r.off, r.n)
			n++
		}
	}
	fmt.Fprintf(log, "fakellm: %d open file(s) unlocked\n", n)
}

// finalPath is the path of the file open at h, or "?".
func finalPath(h windows.Handle) string {
	buf := make([]uint16, windows.MAX_LONG_PATH)
	n, err := windows.GetFinalPathNameByHandle(h, &buf[0], uint32(len(buf)), 0)
	if err != nil || int(n) > len(buf) {
		return "?"
	}
	return windows.UTF16ToString(buf[:n])
}

// spawnDetached starts a helper that sleeps in a process group of its own
// (CREATE_NEW_PROCESS_GROUP: a console control event sent to the serve's
// group does not reach it), the way a serve's helper escapes its parent's
// group: this same program again, as `fakellm --helper-of MODEL`, so that
// its command line names the model and tests can look for it. With
// breakaway it also asks to break away from the serve's job
// (CREATE_BREAKAWAY_FROM_JOB); a job that does not allow it refuses
// (ERROR_ACCESS_DENIED), and the helper is then started in the job, as a
// serve that insists would; the log says which, and the helper's pid.
func spawnDetached(model string, args []string, breakaway bool, log io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The words before this command's own arguments (`fakellm` where the
	// serve is npu-serve-smoke's), so that the helper runs the same command.
	var before []string
	if n := len(os.Args) - 1 - len(args); n >= 0 && slices.Equal(os.Args[1+n:], args) {
		before = os.Args[1 : 1+n]
	}
	argv := append(append([]string{filepath.Base(exe)}, before...), "--helper-of", model)
	sys := &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP, HideWindow: true}
	if breakaway {
		sys.CreationFlags |= windows.CREATE_BREAKAWAY_FROM_JOB
	}
	attr := &os.ProcAttr{Files: []*os.File{nil, nil, nil}, Sys: sys}
	p, err := os.StartProcess(exe, argv, attr)
	if breakaway && errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		fmt.Fprintf(log, "fakellm: breaking away from the job refused (%v): the helper is started in it\n", err)
		sys.CreationFlags &^= windows.CREATE_BREAKAWAY_FROM_JOB
		p, err = os.StartProcess(exe, argv, attr)
	}
	if err != nil {
		return err
	}
	if breakaway {
		fmt.Fprintf(log, "fakellm: helper pid %d, in a process group of its own, %s; this serve %s\n", p.Pid, jobOf(uint32(p.Pid)), jobOf(uint32(os.Getpid())))
	}
	return p.Release()
}

// jobOf says whether the process pid is in a job: "in a job", "in no job",
// or why it cannot be told.
func jobOf(pid uint32) string {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_INFORMATION, false, pid)
	if err != nil {
		return fmt.Sprintf("in a job or not: %v", err)
	}
	defer windows.CloseHandle(h)
	var in int32
	if ok, _, err := procIsProcessInJob.Call(uintptr(h), 0, uintptr(unsafe.Pointer(&in))); ok == 0 {
		return fmt.Sprintf("in a job or not: %v", err)
	}
	if in != 0 {
		return "in a job"
	}
	return "in no job"
}

// mapFile loads the DLL file (LoadLibraryEx, its imports not resolved and
// its entry point not run) and keeps it loaded, as a serve loads its
// backend library: the witnesses on Windows find a backend among the
// modules a process has loaded. The file must be a DLL.
func mapFile(file string) (unmap func(), err error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	h, err := windows.LoadLibraryEx(abs, 0, windows.DONT_RESOLVE_DLL_REFERENCES)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", file, err)
	}
	return func() { windows.FreeLibrary(h) }, nil
}
