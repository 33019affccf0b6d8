//go:build windows

package hold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a ticket is a file of the lock directory whose one byte at
// lockOffset, far past its text, is locked with LockFileEx: the lock
// belongs to the handle, no other handle (another process's, or a
// duplicate in a child) can drop it, and the kernel drops it when the
// handle closes or its process dies, "not necessarily at once" (waiters
// retry). The byte is past the end of the file, so the holder's facts at
// its start stay readable to everyone while the lock stands.
//
// Every file is opened by its path in the lock directory without following
// a reparse point (a symlink or a junction), never inheritable, and shared
// for reading, writing and deleting, so no open of a waiter's stands in the
// way of its owner.

// lockOffset is the locked byte of a ticket: 1 TiB into the file.
const lockOffset = 1 << 40

// lockDir is the shared directory, checked.
type lockDir struct {
	path string
	id   fileID
}

// DefaultDir is where tickets live unless said otherwise:
// %ProgramData%\npu-hold, which the runner's service account and every
// other user can reach.
func DefaultDir() string {
	pd := os.Getenv("ProgramData")
	if pd == "" || !filepath.IsAbs(pd) {
		pd = `C:\ProgramData`
	}
	return filepath.Join(pd, "npu-hold")
}

// dirFix says how to give a runner a lock directory.
func dirFix(path string) string {
	return fmt.Sprintf("create it as an administrator (mkdir %s: under %%ProgramData%% it inherits an ACL that lets every user make files and only their owner remove them), or set NPU_HOLD_DIR to such a directory that every run sharing the device can write", path)
}

// checkLocal refuses a lock directory that is not on a local disk: a UNC
// path (\\server\share\dir, \\?\UNC\server\share\dir), a device
// path other than a drive's (\\.\pipe\x), or a drive letter mapped to a
// share. A share's locks are its server's, shared with every machine that
// mounts it, and its owner and ACL are the server's to say: the machine's
// runs need a directory of the machine's own.
func checkLocal(from, path string) error {
	vol := filepath.VolumeName(path)
	long, isLong := strings.CutPrefix(vol, `\\?\`)
	if !isLong {
		long, isLong = strings.CutPrefix(vol, `\\.\`)
	}
	switch {
	case isLong && len(long) == 2 && long[1] == ':':
		vol = long
	case strings.HasPrefix(vol, `\\`) || strings.HasPrefix(vol, "//"):
		return fmt.Errorf("%s %q is not on a local disk (a UNC path, \\\\server\\share): a lock on a share is its server's, shared with every machine that mounts it, and its owner and ACL are the server's; give a directory on a local disk, e.g. %s", from, path, DefaultDir())
	}
	if len(vol) == 2 && vol[1] == ':' && driveType(vol+`\`) == windows.DRIVE_REMOTE {
		return fmt.Errorf("%s %q is on %s, a drive mapped to a network share: a lock on a share is its server's, shared with every machine that mounts it, and its owner and ACL are the server's; give a directory on a local disk, e.g. %s", from, path, vol, DefaultDir())
	}
	return nil
}

// driveType is GetDriveType of a drive's root (C:\); tests fake it.
var driveType = func(root string) uint32 {
	p, err := windows.UTF16PtrFromString(root)
	if err != nil {
		return windows.DRIVE_UNKNOWN
	}
	return windows.GetDriveType(p)
}

// openLockDir opens path as the lock directory, making it when it is not
// there. It must be a real directory (not a reparse point), owned by this
// user, SYSTEM or the Administrators, and its ACL must let no one else
// delete, re-own or re-ACL it or what is in it (see checkACL).
func openLockDir(path string, create bool) (*lockDir, error) {
	if err := CheckDirPath("the lock directory", path); err != nil {
		return nil, err
	}
	if create && path == DefaultDir() && !isAdmin() {
		// One made by this user would be its own, which every other user
		// refuses (see check): the shared default is an administrator's
		// to make.
		_, err := os.Lstat(path)
		if _, perr := os.Stat(filepath.Dir(path)); errors.Is(err, os.ErrNotExist) && perr == nil {
			return nil, fmt.Errorf("the lock directory %s does not exist, and one made by %s would be refused by every other user; %s", path, userName(), dirFix(path))
		}
	}
	if create {
		if err := os.Mkdir(path, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
			why := err.Error()
			if errors.Is(err, os.ErrNotExist) {
				why = "its parent " + filepath.Dir(path) + " does not exist"
			}
			return nil, fmt.Errorf("the lock directory %s cannot be made (%s); %s", path, why, dirFix(path))
		}
	}
	h, err := openNoFollow(path, windows.FILE_FLAG_BACKUP_SEMANTICS)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the lock directory %s does not exist; %s: %w", path, dirFix(path), err)
	}
	if err != nil {
		return nil, fmt.Errorf("the lock directory %s cannot be opened: %v", path, err)
	}
	defer windows.CloseHandle(h)
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return nil, fmt.Errorf("the lock directory %s cannot be checked: %v", path, err)
	}
	if fi.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY == 0 || fi.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 {
		return nil, fmt.Errorf("the lock directory %s is not a directory (a symlink, a junction or a file); remove it and %s", path, dirFix(path))
	}
	d := &lockDir{path: path, id: idOf(&fi)}
	if err := d.check(h); err != nil {
		return nil, err
	}
	return d, nil
}

// check refuses a directory another user could replace or empty: its
// owner (who can always rewrite its ACL) must be this user, SYSTEM or the
// Administrators, and no allow entry of its ACL may give anyone else
// DELETE, WRITE_DAC, WRITE_OWNER or FILE_DELETE_CHILD, on it or (an entry
// it passes on) on the files made in it; CREATOR OWNER is each ticket's own
// maker.
func (d *lockDir) check(h windows.Handle) error {
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("the lock directory %s: its owner and ACL cannot be read (%v), so npu-hold cannot tell who could replace it", d.path, err)
	}
	me, err := currentUser()
	if err != nil {
		return fmt.Errorf("the lock directory %s cannot be checked: this process's user is unknown: %v", d.path, err)
	}
	return d.checkSD(sd, me)
}

// checkSD is check's judgement of the directory's security descriptor,
// for the user me.
func (d *lockDir) checkSD(sd *windows.SECURITY_DESCRIPTOR, me *windows.SID) error {
	own, _, err := sd.Owner()
	if err != nil || own == nil {
		return fmt.Errorf("the lock directory %s has no owner that can be read, so npu-hold cannot tell who could replace it; %s", d.path, dirFix(d.path))
	}
	if !trusted(own, me) {
		return fmt.Errorf("the lock directory %s belongs to %s, who could remove or replace anyone's ticket in it; remove it (as an administrator or as its owner) and %s", d.path, sidText(own), dirFix(d.path))
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		return fmt.Errorf("the lock directory %s has no ACL (everyone may do anything in it); remove it and %s", d.path, dirFix(d.path))
	}
	const dangerous = windows.DELETE | windows.WRITE_DAC | windows.WRITE_OWNER | windows.GENERIC_ALL | fileDeleteChild
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if windows.GetAce(dacl, i, &ace) != nil || ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE {
			continue
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
		if ace.Mask&dangerous == 0 || trusted(sid, me) || sid.IsWellKnown(windows.WinCreatorOwnerSid) {
			continue
		}
		return fmt.Errorf("the lock directory %s lets %s delete or re-ACL what is in it (access mask %#x), so anyone can remove anyone's ticket; remove that entry (icacls %s /remove %s) or %s", d.path, sidText(sid), uint32(ace.Mask), d.path, sid.String(), dirFix(d.path))
	}
	return nil
}

// fileDeleteChild is a directory's right to delete what is in it,
// whatever their own ACLs say.
const fileDeleteChild = 0x40

// trusted are the owners that may hold the lock directory: this user,
// SYSTEM and the Administrators.
func trusted(sid, me *windows.SID) bool {
	return sid.Equals(me) || sid.IsWellKnown(windows.WinLocalSystemSid) || sid.IsWellKnown(windows.WinBuiltinAdministratorsSid)
}

// isAdmin tells whether this process acts as an administrator: a
// directory it makes belongs to the Administrators.
func isAdmin() bool {
	admins, err := windows.CreateWellKnownSid(windows.WinBuiltinAdministratorsSid)
	if err != nil {
		return false
	}
	in, err := windows.Token(0).IsMember(admins)
	return err == nil && in
}

func currentUser() (*windows.SID, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, err
	}
	return tu.User.Sid, nil
}

// sidText is "DOMAIN\name (SID)", or the SID alone.
func sidText(sid *windows.SID) string {
	if name := ownerNamed(sid.String()); name != sid.String() {
		return name + " (" + sid.String() + ")"
	}
	return sid.String()
}

// ownerNamed is the account a SID names, as a ticket of its own would say
// it.
func ownerNamed(owner string) string {
	sid, err := windows.StringToSid(owner)
	if err != nil {
		return owner
	}
	account, domain, _, err := sid.LookupAccount("")
	switch {
	case err != nil:
		return owner
	case domain == "":
		return account
	}
	return domain + `\` + account
}

// ownerOf is a file's owner, named for a message.
func ownerOf(st fileStat) string {
	if sid, err := windows.StringToSid(st.owner); err == nil {
		return sidText(sid)
	}
	return st.owner
}

func (d *lockDir) close() {}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// openNoFollow opens path for reading without following a reparse point,
// not inheritable.
func openNoFollow(path string, flags uint32) (windows.Handle, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return windows.InvalidHandle, err
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|flags, 0)
	if err != nil {
		return windows.InvalidHandle, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return h, nil
}

func idOf(fi *windows.ByHandleFileInformation) fileID {
	return fileID{uint64(fi.VolumeSerialNumber), uint64(fi.FileIndexHigh)<<32 | uint64(fi.FileIndexLow)}
}

// sameEntry tells whether two files of the lock directory are one: by
// their file index alone, as both are on the directory's volume (Wine
// reports a volume serial number of 0 for a handle made with CREATE_NEW,
// and the real one for the same file opened again).
func sameEntry(a, b fileID) bool { return a.ino == b.ino }

// statHandle is what the system says of an open file.
func statHandle(h windows.Handle) (fileStat, *windows.ByHandleFileInformation, error) {
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return fileStat{}, nil, err
	}
	st := fileStat{id: idOf(&fi), changed: time.Unix(0, fi.LastWriteTime.Nanoseconds())}
	if sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION); err == nil {
		if own, _, err := sd.Owner(); err == nil && own != nil {
			st.owner = own.String()
			if me, err := currentUser(); err == nil {
				st.mine = own.Equals(me)
			}
		}
	}
	return st, &fi, nil
}

func (d *lockDir) join(name string) string { return filepath.Join(d.path, name) }

// names lists the directory's entries.
func (d *lockDir) names() ([]string, error) {
	es, err := os.ReadDir(d.path)
	names := make([]string, 0, len(es))
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, err
}

// open opens an entry for reading if it is a regular file, without
// following a reparse point. Anything else is refused.
func (d *lockDir) open(name string) (*os.File, fileStat, error) {
	h, err := openNoFollow(d.join(name), 0)
	if err != nil {
		return nil, fileStat{}, err
	}
	st, fi, err := statHandle(h)
	if err == nil && fi.FileAttributes&(windows.FILE_ATTRIBUTE_DIRECTORY|windows.FILE_ATTRIBUTE_REPARSE_POINT) != 0 {
		err = errors.New("not a regular file")
	}
	if err != nil {
		windows.CloseHandle(h)
		return nil, fileStat{}, fmt.Errorf("%s: %w", d.join(name), err)
	}
	return os.NewFile(uintptr(h), d.join(name)), st, nil
}

// publish makes a file under name holding text, locked before it is
// visible: a file under a ticket's name that nobody locks is always a dead
// one. The name is taken only if it is free (MoveFileEx without
// MOVEFILE_REPLACE_EXISTING); someone else's file is never replaced.
func (d *lockDir) publish(name string, text []byte) (*os.File, error) {
	var tmp string
	var h windows.Handle = windows.InvalidHandle
	for range 100 {
		tmp = d.join(".new-" + randomName())
		p, err := windows.UTF16PtrFromString(tmp)
		if err != nil {
			return nil, err
		}
		h, err = windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE|windows.DELETE, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("a ticket cannot be made in %s: %v", d.path, err)
		}
		h = windows.InvalidHandle
	}
	if h == windows.InvalidHandle {
		return nil, fmt.Errorf("a ticket cannot be made in %s: every name tried is taken", d.path)
	}
	f := os.NewFile(uintptr(h), d.join(name))
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := lockByte(h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY); err != nil {
		return fail(err)
	}
	if _, err := f.WriteAt(text, 0); err != nil {
		return fail(err)
	}
	from, _ := windows.UTF16PtrFromString(tmp)
	to, err := windows.UTF16PtrFromString(d.join(name))
	if err != nil {
		return fail(err)
	}
	if err := windows.MoveFileEx(from, to, 0); err != nil {
		return fail(&os.LinkError{Op: "rename", Old: tmp, New: d.join(name), Err: err})
	}
	return f, nil
}

// remove removes our own entry name, if it still is the file f.
func (d *lockDir) remove(name string, f *os.File) {
	mine, _, err := statHandle(windows.Handle(f.Fd()))
	if err != nil {
		return
	}
	g, now, err := d.open(name)
	if err != nil {
		return
	}
	g.Close()
	if sameEntry(now.id, mine.id) {
		os.Remove(d.join(name))
	}
}

// lockQueue takes the queue's lock: the locked byte of the lock
// directory's file .queue, made by the first to queue.
func (d *lockDir) lockQueue(ctx context.Context) (unlock func(), err error) {
	name := d.join(".queue")
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_ALWAYS, windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return nil, fmt.Errorf("the queue of %s cannot be taken: %s: %v", d.path, name, err)
	}
	for {
		err := lockByte(h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY)
		if err == nil {
			return func() { windows.CloseHandle(h) }, nil
		}
		if !errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			windows.CloseHandle(h)
			return nil, fmt.Errorf("the queue of %s cannot be taken: %v", d.path, err)
		}
		select {
		case <-ctx.Done():
			windows.CloseHandle(h)
			return nil, ctx.Err()
		case <-time.After(retryEvery):
		}
	}
}

// retryEvery is how often a lock found taken is tried again where nothing
// says when it goes.
const retryEvery = 20 * time.Millisecond

// lockByte locks the ticket's byte of h.
func lockByte(h windows.Handle, flags uint32) error {
	ol := windows.Overlapped{OffsetHigh: lockOffset >> 32, Offset: lockOffset & 0xffffffff}
	return windows.LockFileEx(h, flags, 0, 1, 0, &ol)
}

func unlockByte(h windows.Handle) error {
	ol := windows.Overlapped{OffsetHigh: lockOffset >> 32, Offset: lockOffset & 0xffffffff}
	return windows.UnlockFileEx(h, 0, 1, 0, &ol)
}

// isLive tells whether an open ticket is locked by its owner: a ticket
// nobody locks belongs to a waiter or holder that is gone.
func isLive(f *os.File) bool {
	h := windows.Handle(f.Fd())
	if lockByte(h, windows.LOCKFILE_FAIL_IMMEDIATELY) == nil {
		unlockByte(h)
		return false
	}
	return true
}

// waitGone reports when the exclusive lock on f, a live ticket's, is gone:
// its owner was granted, gave up, released or died. It waits on a handle
// of its own, which it closes when done, so f can be closed at once.
func waitGone(f *os.File) <-chan error {
	done := make(chan error, 1)
	self := windows.CurrentProcess()
	var h windows.Handle
	if err := windows.DuplicateHandle(self, windows.Handle(f.Fd()), self, &h, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
		done <- err
		return done
	}
	go func() {
		defer windows.CloseHandle(h)
		for {
			err := lockByte(h, windows.LOCKFILE_FAIL_IMMEDIATELY)
			if err == nil {
				unlockByte(h)
				done <- nil
				return
			}
			if !errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
				done <- err
				return
			}
			time.Sleep(retryEvery)
		}
	}()
	return done
}
