//go:build unix

package hold

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// tokenFile is a token written by this process.
type tokenFile struct {
	path     string
	dir      int // the token's directory, open
	name     string
	dev, ino uint64
	text     []byte
}

// maxToken bounds what is read of a file at the token's path.
const maxToken = 64 << 10

// writeToken writes tk at path, unless something other than a stale token is
// there. The error says why nothing was written.
func writeToken(path string, tk token) (*tokenFile, error) {
	dir, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("its directory cannot be opened: %v", err)
	}
	t := &tokenFile{path: path, dir: dir, name: filepath.Base(path)}
	b, _ := json.MarshalIndent(tk, "", "  ")
	t.text = append(b, '\n')
	if err := t.write(); err != nil {
		unix.Close(dir)
		return nil, err
	}
	return t, nil
}

func (t *tokenFile) write() error {
	old, err := inspectToken(t.dir, t.name)
	if err != nil {
		return err
	}
	tmp := "." + t.name + ".new-" + randomName()
	fd, err := unix.Openat(t.dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("it cannot be made: %v", err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	var st unix.Stat_t
	_, err = f.Write(t.text)
	if err == nil {
		err = unix.Fstat(fd, &st)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if old == nil {
			err = renameNoReplace(t.dir, tmp, t.name)
			if errors.Is(err, unix.EEXIST) {
				err = errors.New("a file appeared there while it was written; it is left as it is")
			}
		} else {
			// The stale token is replaced only if it still is the one judged.
			var now unix.Stat_t
			if unix.Fstatat(t.dir, t.name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || now.Dev != old.Dev || now.Ino != old.Ino {
				err = errors.New("the stale token there changed while it was replaced; it is left as it is")
			} else {
				err = unix.Renameat(t.dir, tmp, t.dir, t.name)
			}
		}
	}
	if err != nil {
		unix.Unlinkat(t.dir, tmp, 0)
		return err
	}
	t.dev, t.ino = st.Dev, st.Ino
	return nil
}

// remove removes the token if it still is the file written, and closes it.
func (t *tokenFile) remove() {
	defer unix.Close(t.dir)
	f, st, err := openRegular(t.dir, t.name)
	if err != nil {
		return
	}
	defer f.Close()
	if st.Dev == t.dev && st.Ino == t.ino && string(readUpTo(f, maxToken)) == string(t.text) {
		unix.Unlinkat(t.dir, t.name, 0)
	}
}

// inspectToken says what is at name: nil when nothing is, the file's stat
// when it is a stale token of this user's (to be replaced), and an error
// saying what it is otherwise (to be left alone).
func inspectToken(dir int, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("what is there cannot be read: %v", err)
	}
	if what := fileKind(st.Mode); what != "" {
		return nil, fmt.Errorf("a %s is there, left as it is", what)
	}
	if st.Uid != uint32(os.Geteuid()) {
		return nil, fmt.Errorf("a file of %s is there, left as it is", owner(st.Uid))
	}
	tk, live, err := readToken(dir, name)
	if err != nil {
		return nil, err
	}
	if live {
		return nil, fmt.Errorf("it holds the token of ticket %d of %s, held by %s, which is still held; it is left as it is", tk.Ticket, clip(tk.Device, maxName), tk.Facts.String())
	}
	return &st, nil
}

// fileKind names what is not a regular file; "" for a regular one.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFSOCK:
		return "socket"
	}
	return "device node"
}

// readToken reads the token at name, and tells whether its ticket is still
// held. A file that is not a token is an error saying so.
func readToken(dir int, name string) (*token, bool, error) {
	f, _, err := openRegular(dir, name)
	if err != nil {
		return nil, false, fmt.Errorf("what is there cannot be read: %v", err)
	}
	defer f.Close()
	var tk token
	if json.Unmarshal(readUpTo(f, maxToken), &tk) != nil || tk.LockDir == "" || tk.TicketFile == "" {
		return nil, false, errors.New("a file npu-hold did not write is there (not a token naming its ticket), left as it is")
	}
	tk.Seen = nil
	live, err := tk.live()
	if err != nil {
		return nil, false, fmt.Errorf("a token is there whose ticket cannot be checked (%v); it is left as it is", err)
	}
	return &tk, live, nil
}

// live tells whether the token's ticket is still held: its file is there,
// locked, and still the same ticket (numbers are used again).
func (tk *token) live() (bool, error) {
	if strings.ContainsAny(tk.TicketFile, "/\x00") || tk.TicketFile == "." || tk.TicketFile == ".." {
		return false, nil
	}
	dir, err := openLockDir(tk.LockDir, false)
	if isNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer dir.close()
	f, _, err := dir.open(tk.TicketFile)
	if err != nil {
		// Gone, or no longer a file: a holder's file stays until it
		// releases.
		return false, nil
	}
	defer f.Close()
	if !isLive(f) {
		return false, nil
	}
	var now Facts
	if json.Unmarshal(read(f), &now) != nil {
		return false, nil
	}
	return now.Ticket == tk.Ticket && now.PID == tk.PID && now.Device == tk.Device && now.Queued.Equal(tk.Queued), nil
}

// ClearStaleToken removes the token file at path if it is a stale token of
// this user's: its ticket is no longer held. It returns the facts of the
// token removed, or nil when there was none to remove.
func ClearStaleToken(path string) (*Facts, error) {
	dir, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	defer unix.Close(dir)
	name := filepath.Base(path)
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || fileKind(st.Mode) != "" || st.Uid != uint32(os.Geteuid()) {
		return nil, nil
	}
	tk, live, err := readToken(dir, name)
	if err != nil || live {
		return nil, nil
	}
	var now unix.Stat_t
	if unix.Fstatat(dir, name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return nil, nil
	}
	if err := unix.Unlinkat(dir, name, 0); err != nil {
		return nil, fmt.Errorf("the stale token file %s cannot be removed: %v", path, err)
	}
	tk.clean()
	return &tk.Facts, nil
}

// openRegular opens name in dir for reading if it is a regular file,
// without following a symlink and without blocking.
func openRegular(dir int, name string) (*os.File, *unix.Stat_t, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	if what := fileKind(st.Mode); what != "" {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("%s is a %s, not a regular file", name, what)
	}
	return os.NewFile(uintptr(fd), name), &st, nil
}

// readUpTo reads at most n bytes of f from its start.

// renameNoReplace gives tmp the name, only if the name is free.
func renameNoReplace(dir int, tmp, name string) error {
	err := unix.Renameat2(dir, tmp, dir, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without RENAME_NOREPLACE: a hard link fails on a
		// taken name too.
		if err = unix.Linkat(dir, tmp, dir, name, 0); err == nil {
			unix.Unlinkat(dir, tmp, 0)
		}
	}
	return err
}

// clean makes facts read from a file anyone could have written safe to
// print: no control characters (so no escape sequence, no line break and no
// workflow command of a line of its own), and bounded lengths.
func (f *Facts) clean() {
	f.Device = clip(f.Device, maxName)
	f.User = clip(f.User, maxName)
	f.Command = clip(f.Command, maxShown)
	f.RunURL = clip(f.RunURL, maxShown)
	if len(f.Devices) > maxDevices {
		f.Devices = f.Devices[:maxDevices]
	}
	for i, d := range f.Devices {
		f.Devices[i] = clip(d, maxName)
	}
}
