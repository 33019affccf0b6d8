//go:build windows

package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/windows"
)

// stillActive is the exit code of a process that runs (STILL_ACTIVE).
const stillActive = 259

// processGone tells whether no process has the pid.
func processGone(pid int) bool { return !alive(pid) }

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		// Another user's process is there, but not ours to look at.
		return errors.Is(err, windows.ERROR_ACCESS_DENIED)
	}
	defer windows.CloseHandle(h)
	var code uint32
	if windows.GetExitCodeProcess(h, &code) != nil {
		return true
	}
	return code == stillActive
}

// describe is "pid N (program)", safe to print. Windows gives another
// process's command line to no ordinary user: the program's path it does.
func describe(pid int) string {
	prog := ""
	if h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid)); err == nil {
		buf := make([]uint16, windows.MAX_LONG_PATH)
		n := uint32(len(buf))
		if windows.QueryFullProcessImageName(h, 0, &buf[0], &n) == nil {
			prog = windows.UTF16ToString(buf[:n])
		}
		windows.CloseHandle(h)
	}
	return fmt.Sprintf("pid %d (%s)", pid, clip(prog, 120))
}

// changeTime is when f was last written: Windows lets a file's owner set
// every time it keeps, so nothing on Windows rests on it.
func changeTime(f *os.File) (time.Time, error) {
	st, _, err := statHandle(windows.Handle(f.Fd()))
	return st.changed, err
}

// flockers would say which process took each ticket's lock: Windows tells
// no one who holds a byte-range lock, so it says nothing, and a ticket's
// locker is the pid it claims.
func flockers() map[fileID]int { return map[fileID]int{} }

// openers would be the pids that have f open: Windows lists another
// process's handles only through an undocumented system query, so none
// are named.
func openers(*os.File) []int { return nil }

// Held is nil while the ticket's lock is still this holder's, else why not.
//
// A LockFileEx lock belongs to the handle that took it: no other handle,
// not even a duplicate in a child, can drop it, and the holder's handle is
// never inheritable. What can go is the name: waiters find holders by
// name, so a process of the holder's user that removes or renames the
// holding file (or the lock directory) frees the device for the next
// waiter while the lock stands. So the directory must still be under its
// path, and the file under its name, with one link.
func (t *Ticket) Held() error {
	mine, fi, err := statHandle(windows.Handle(t.file.Fd()))
	if err != nil {
		return fmt.Errorf("the lock of ticket %s cannot be checked: %v", t.name, err)
	}
	h, err := openNoFollow(t.dir.path, windows.FILE_FLAG_BACKUP_SEMANTICS)
	if err == nil {
		var dfi windows.ByHandleFileInformation
		err = windows.GetFileInformationByHandle(h, &dfi)
		windows.CloseHandle(h)
		if err == nil && idOf(&dfi) != t.dir.id {
			err = errors.New("another directory")
		}
	}
	if err != nil {
		return fmt.Errorf("the lock directory %s is not the directory the ticket %s was taken in any more (it was renamed or removed while held, by a process of its owner's): waiters saw no holder, and the device was free to anyone", t.dir.path, t.name)
	}
	// A handle of its own: the holder's would take a shared lock over its
	// own exclusive one.
	f, named, err := t.dir.open(t.name)
	if err == nil {
		defer f.Close()
	}
	switch {
	case err != nil || !sameEntry(named.id, mine.id):
		return fmt.Errorf("the ticket %s is not under its name in the lock directory any more (removed or renamed while held, by a process of its user): waiters saw no holder, and the device was free to anyone", t.name)
	case fi.NumberOfLinks != 1:
		return fmt.Errorf("the ticket %s was linked in the lock directory while held (by a process of its user): waiters may have seen no holder, and the device was free to anyone", t.name)
	}
	if isLive(f) {
		return nil
	}
	return fmt.Errorf("the ticket %s was not locked any more, and the device was free to anyone", t.name)
}

// tokenFile is a token written by this process: none on Windows yet.
type tokenFile struct{}

func (*tokenFile) remove() {}

// errNoToken says what Windows does not give yet.
var errNoToken = errors.New("the token file is not written on Windows (npu-hold writes it on Linux only); the ticket holds the device all the same")

func writeToken(string, token) (*tokenFile, error) { return nil, errNoToken }

// ClearStaleToken removes the token file at path if it is a stale token of
// this user's. On Windows no token is written, so none is removed: a file
// at path is left as it is, and said so.
func ClearStaleToken(path string) (*Facts, error) {
	if _, err := os.Lstat(filepath.Clean(path)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return nil, fmt.Errorf("%s is left as it is: %v", path, errNoToken)
}

// processStarted is when the process pid started (GetProcessTimes); ok is
// false where it cannot be opened.
func processStarted(pid int) (t time.Time, ok bool) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return time.Time{}, false
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if windows.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return time.Time{}, false
	}
	return time.Unix(0, created.Nanoseconds()), true
}

// DefaultPools is where a host declares its device pools:
// %ProgramData%\npu-hold\pools, beside the tickets in the default lock
// directory, made by an administrator.
var DefaultPools = filepath.Join(DefaultDir(), "pools")

// checkPoolsOwner refuses a pools file that is not an administrator's,
// SYSTEM's or this user's: any user may make files in %ProgramData%\npu-hold,
// and a pools file made by one would give every run their pools.
func checkPoolsOwner(path string, f *os.File) error {
	st, _, err := statHandle(windows.Handle(f.Fd()))
	if err != nil {
		return fmt.Errorf("the pools file %s cannot be checked: %v", path, err)
	}
	own, err := windows.StringToSid(st.owner)
	if err != nil {
		return fmt.Errorf("the pools file %s has no owner that can be read, so npu-hold cannot tell who declared its pools; make it as an administrator", path)
	}
	me, err := currentUser()
	if err != nil || !trusted(own, me) {
		return fmt.Errorf("the pools file %s belongs to %s, not to an administrator, SYSTEM or this user, so anyone could have declared its pools; remove it and make it as an administrator (docs/runner.md)", path, sidText(own))
	}
	return nil
}
