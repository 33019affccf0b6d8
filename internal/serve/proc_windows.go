package serve

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/windows"
)

// List is every process a toolhelp snapshot shows, with its command line
// where this user may read it (see Proc).
func List() []Proc {
	all := snapshot()
	for i := range all {
		all[i] = withCommand(all[i])
	}
	return all
}

// Stat reads one process from a toolhelp snapshot, with its command line.
func Stat(pid int) (Proc, bool) {
	for _, p := range snapshot() {
		if p.PID == pid {
			return withCommand(p), true
		}
	}
	return Proc{}, false
}

// snapshot is every process of a toolhelp snapshot (CreateToolhelp32Snapshot,
// TH32CS_SNAPPROCESS): its pid, its parent's pid as it was when it started
// (Windows does not re-parent: the parent may be gone, and its pid reused)
// and its image's name. The System Idle Process (pid 0) is left out.
func snapshot() []Proc {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil
	}
	defer windows.CloseHandle(snap)
	var e windows.ProcessEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	var out []Proc
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		if e.ProcessID == 0 {
			continue
		}
		out = append(out, Proc{PID: int(e.ProcessID), PPID: int(e.ParentProcessID), State: 'R', Command: windows.UTF16ToString(e.ExeFile[:])})
	}
	return out
}

// withCommand gives p its creation time and its command line, cut to 200
// bytes, where this user may open the process (PROCESS_QUERY_LIMITED_INFORMATION);
// else the image's path; else p keeps the image's name the snapshot gave.
func withCommand(p Proc) Proc {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(p.PID))
	if err != nil {
		return p
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if windows.GetProcessTimes(h, &created, &exited, &kernel, &user) == nil {
		p.Start = uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime)
	}
	if cl, err := commandLine(h); err == nil && cl != "" {
		p.Command = cl
	} else if cl, err := pebCommandLine(p.PID); err == nil && cl != "" {
		p.Command = cl
	} else if img, err := imagePath(h); err == nil {
		p.Command = img
	}
	if len(p.Command) > 200 {
		p.Command = p.Command[:200]
	}
	return p
}

// commandLine is a process's command line (NtQueryInformationProcess,
// ProcessCommandLineInformation, Windows 8.1 and later).
func commandLine(h windows.Handle) (string, error) {
	buf := make([]byte, 1024)
	for range 4 {
		var n uint32
		err := windows.NtQueryInformationProcess(h, windows.ProcessCommandLineInformation, unsafe.Pointer(&buf[0]), uint32(len(buf)), &n)
		if err == nil {
			us := (*windows.NTUnicodeString)(unsafe.Pointer(&buf[0]))
			return us.String(), nil
		}
		if !errors.Is(err, windows.STATUS_INFO_LENGTH_MISMATCH) && !errors.Is(err, windows.STATUS_BUFFER_TOO_SMALL) && !errors.Is(err, windows.STATUS_BUFFER_OVERFLOW) {
			return "", err
		}
		if int(n) <= len(buf) {
			n = uint32(2 * len(buf))
		}
		buf = make([]byte, n)
	}
	return "", errors.New("the command line kept growing")
}

// pebCommandLine is a process's command line read from its memory (its
// PEB's process parameters), where the system has no
// ProcessCommandLineInformation (Wine 8): it needs PROCESS_VM_READ, which
// this user has on its own processes, and reads a process of this one's
// architecture.
func pebCommandLine(pid int) (string, error) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_INFORMATION|windows.PROCESS_VM_READ, false, uint32(pid))
	if err != nil {
		return "", err
	}
	defer windows.CloseHandle(h)
	var pbi windows.PROCESS_BASIC_INFORMATION
	if err := windows.NtQueryInformationProcess(h, windows.ProcessBasicInformation, unsafe.Pointer(&pbi), uint32(unsafe.Sizeof(pbi)), nil); err != nil {
		return "", err
	}
	var peb windows.PEB
	if err := readMemory(h, uintptr(unsafe.Pointer(pbi.PebBaseAddress)), unsafe.Pointer(&peb), unsafe.Sizeof(peb)); err != nil {
		return "", err
	}
	var params windows.RTL_USER_PROCESS_PARAMETERS
	if err := readMemory(h, uintptr(unsafe.Pointer(peb.ProcessParameters)), unsafe.Pointer(&params), unsafe.Sizeof(params)); err != nil {
		return "", err
	}
	n := int(params.CommandLine.Length) / 2
	if n == 0 {
		return "", nil
	}
	n = min(n, 4096) // 200 bytes are kept
	buf := make([]uint16, n)
	if err := readMemory(h, uintptr(unsafe.Pointer(params.CommandLine.Buffer)), unsafe.Pointer(&buf[0]), uintptr(2*n)); err != nil {
		return "", err
	}
	return windows.UTF16ToString(buf), nil
}

// readMemory reads size bytes at addr of process h into to.
func readMemory(h windows.Handle, addr uintptr, to unsafe.Pointer, size uintptr) error {
	if addr == 0 {
		return errors.New("a null address")
	}
	var n uintptr
	if err := windows.ReadProcessMemory(h, addr, (*byte)(to), size, &n); err != nil {
		return err
	}
	if n != size {
		return errors.New("a short read")
	}
	return nil
}

// imagePath is the full path of a process's image (QueryFullProcessImageName).
func imagePath(h windows.Handle) (string, error) {
	buf := make([]uint16, windows.MAX_LONG_PATH)
	n := uint32(len(buf))
	if err := windows.QueryFullProcessImageName(h, 0, &buf[0], &n); err != nil {
		return "", err
	}
	return windows.UTF16ToString(buf[:n]), nil
}

// Descendants is every process below pid, pid itself included, as a
// toolhelp snapshot shows them now, without command lines. Windows keeps
// each process's parent pid as it was when it started: a process whose
// parent died is below nobody, and one whose parent's pid was reused may
// be counted below the new process. The serve's own processes are read
// from its job (Process.Tree), not from here.
func Descendants(pid int) []Proc {
	all := snapshot()
	children := map[int][]Proc{}
	var out []Proc
	for _, p := range all {
		if p.PPID != p.PID {
			children[p.PPID] = append(children[p.PPID], p)
		}
		if p.PID == pid {
			out = append(out, p)
		}
	}
	seen := map[int]bool{pid: true}
	for i := 0; i < len(out); i++ {
		for _, c := range children[out[i].PID] {
			if !seen[c.PID] {
				seen[c.PID] = true
				out = append(out, c)
			}
		}
	}
	return out
}
