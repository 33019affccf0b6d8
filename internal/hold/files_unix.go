//go:build unix

package hold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The lock directory is shared with every local user, so nothing in it is
// trusted. Every file is opened relative to the directory's descriptor,
// never through a symlink (O_NOFOLLOW) and never in a way that can block
// (O_NONBLOCK: a FIFO opens at once and is then refused by fstat). Nothing
// that belongs to someone else is changed: their files are read and probed
// for locks, never written, chmodded or removed.

// dirFix says how to give a runner a lock directory: the host's, made for
// every boot, or one of its own choosing; and where npu-hold cannot
// exclude at all (pods, each with its own /run), the device plugin does.
func dirFix(path string) string {
	return fmt.Sprintf("create it for every boot with the systemd-tmpfiles line '%s', or set NPU_HOLD_DIR to a directory of mode 1777 that every run sharing the device can write; in a Kubernetes pod, whose device the device plugin gives it alone, run the gate with hold: none (docs/runner.md)", tmpfilesLine(path))
}

func procText(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

// lockDir is the shared directory, opened and checked.
type lockDir struct {
	path string
	fd   int
}

// openLockDir opens path as the lock directory, making it when it is not
// there. It must be a real directory, belong to root or to this user (its
// owner can remove anyone's tickets), and, when others may write in it, be
// sticky (so that only a file's owner can remove or rename it).
func openLockDir(path string, create bool) (*lockDir, error) {
	if err := CheckDirPath("the lock directory", path); err != nil {
		return nil, err
	}
	if create && path == DefaultDir() && os.Geteuid() != 0 {
		// One made by this user would be its own, which every other user
		// refuses (see check): the shared default is root's to make.
		_, err := os.Lstat(path)
		if _, perr := os.Stat(filepath.Dir(path)); errors.Is(err, os.ErrNotExist) && perr == nil {
			return nil, fmt.Errorf("the lock directory %s does not exist, and one made by uid %d would be refused by every other user; %s", path, os.Geteuid(), dirFix(path))
		}
	}
	if create {
		if err := unix.Mkdir(path, 0o777); err != nil && !errors.Is(err, unix.EEXIST) {
			why := err.Error()
			if errors.Is(err, unix.ENOENT) {
				why = "its parent " + filepath.Dir(path) + " does not exist"
			}
			return nil, fmt.Errorf("the lock directory %s cannot be made (%s); %s", path, why, dirFix(path))
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("the lock directory %s does not exist; %s: %w", path, dirFix(path), err)
	}
	if err != nil {
		what := err.Error()
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			what = "not a directory (a symlink or a file)"
		}
		return nil, fmt.Errorf("the lock directory %s is %s; remove it and create it with the systemd-tmpfiles line '%s'", path, what, tmpfilesLine(path))
	}
	d := &lockDir{path: path, fd: fd}
	if err := d.check(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return d, nil
}

func (d *lockDir) check() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return err
	}
	me := uint32(os.Geteuid())
	if st.Uid != 0 && st.Uid != me && outsideNS(st.Uid, procText("/proc/self/uid_map"), procText("/proc/sys/kernel/overflowuid")) {
		return fmt.Errorf("the lock directory %s belongs to uid %d, which in this user namespace is how every user outside it shows (root or anyone), so npu-hold cannot tell whose it is; run the runner without a user namespace of its own (in Kubernetes, hostUsers left true), or, in a pod whose device the device plugin gives it alone, run the gate with hold: none (docs/runner.md)", d.path, st.Uid)
	}
	if st.Uid != 0 && st.Uid != me {
		return fmt.Errorf("the lock directory %s belongs to %s, who could remove or replace anyone's ticket in it; remove it (as root or as its owner) and create it owned by root for every boot with the systemd-tmpfiles line '%s'", d.path, owner(st.Uid), tmpfilesLine(d.path))
	}
	shared := st.Mode&0o022 != 0
	if st.Uid == me && (st.Mode&0o7777 != 0o1777) {
		// Ours: open it up to every user, sticky.
		if err := unix.Fchmod(d.fd, 0o1777); err != nil {
			return fmt.Errorf("the lock directory %s cannot be made mode 1777: %v", d.path, err)
		}
		return nil
	}
	if shared && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("the lock directory %s is writable by others but not sticky, so anyone can remove anyone's ticket; chmod 1777 %s (or the systemd-tmpfiles line '%s')", d.path, d.path, tmpfilesLine(d.path))
	}
	// A ticket is a file made in it: a directory this user cannot write
	// holds no ticket of its.
	if err := unix.Access(d.path, unix.W_OK|unix.X_OK); err != nil {
		what := fmt.Sprintf("not writable by uid %d (mode %04o, owner %s)", me, st.Mode&0o7777, owner(st.Uid))
		if errors.Is(err, unix.EROFS) {
			what = "on a read-only mount"
		}
		return fmt.Errorf("the lock directory %s is %s, so no ticket can be made in it; chmod 1777 %s as root, or %s", d.path, what, d.path, dirFix(d.path))
	}
	return nil
}

func (d *lockDir) close() { unix.Close(d.fd) }

func isNotExist(err error) bool { return errors.Is(err, unix.ENOENT) }

func tmpfilesLine(path string) string { return "d " + path + " 1777 root root -" }

// owner names a uid for people.
func owner(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// names lists the directory's entries, read from a descriptor of its own.
func (d *lockDir) names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}

// open opens an entry for reading if it is a regular file, without
// following a symlink and without blocking. Anything else is refused.
func (d *lockDir) open(name string) (*os.File, fileStat, error) {
	f, st, err := openRegular(d.fd, name)
	if err != nil {
		return nil, fileStat{}, fmt.Errorf("%s/%s: %w", d.path, name, err)
	}
	return f, statOf(st), nil
}

func statOf(st *unix.Stat_t) fileStat {
	return fileStat{
		uid:     st.Uid,
		owner:   strconv.FormatUint(uint64(st.Uid), 10),
		mine:    st.Uid == uint32(os.Geteuid()),
		id:      fileID{st.Dev, st.Ino},
		changed: time.Unix(st.Ctim.Unix()),
	}
}

// ownerNamed is the name of the user whose uid owner is, as a ticket of
// its own would say it.
func ownerNamed(owner string) string {
	if u, err := user.LookupId(owner); err == nil {
		return u.Username
	}
	return owner
}

// ownerOf is a file's owner, named for a message.
func ownerOf(st fileStat) string { return owner(st.uid) }

// lockQueue takes the queue's lock: a flock of the lock directory itself,
// which no user but root can remove or replace.
func (d *lockDir) lockQueue(ctx context.Context) (unlock func(), err error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	lk := os.NewFile(uintptr(fd), d.path)
	if err := flockWait(ctx, lk, unix.LOCK_EX); err != nil {
		lk.Close()
		return nil, err
	}
	return func() { lk.Close() }, nil
}

// publish makes a file under name holding text, locked (LOCK_EX) before it
// is visible: a file under a ticket's name that nobody locks is always a
// dead one. The name is taken only if it is free; someone else's file is
// never replaced.
func (d *lockDir) publish(name string, text []byte) (*os.File, error) {
	var tmp string
	var fd int
	for range 100 {
		tmp = ".new-" + randomName()
		var err error
		fd, err = unix.Openat(d.fd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("a ticket cannot be made in %s: %v", d.path, err)
		}
		fd = -1
	}
	if fd < 0 {
		return nil, fmt.Errorf("a ticket cannot be made in %s: every name tried is taken", d.path)
	}
	f := os.NewFile(uintptr(fd), d.path+"/"+name)
	fail := func(err error) (*os.File, error) {
		unix.Unlinkat(d.fd, tmp, 0)
		f.Close()
		return nil, err
	}
	// Created by us with O_EXCL: ours to open up for reading.
	if err := unix.Fchmod(fd, 0o644); err != nil {
		return fail(err)
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		return fail(err)
	}
	if _, err := f.WriteAt(text, 0); err != nil {
		return fail(err)
	}
	if err := d.rename(tmp, name); err != nil {
		return fail(err)
	}
	return f, nil
}

// rename gives tmp the name, only if the name is free.
func (d *lockDir) rename(tmp, name string) error { return renameNoReplace(d.fd, tmp, name) }

// remove removes our own entry name, if it still is the file f.
func (d *lockDir) remove(name string, f *os.File) {
	var mine, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &mine) != nil || unix.Fstatat(d.fd, name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if mine.Ino == now.Ino && mine.Dev == now.Dev {
		unix.Unlinkat(d.fd, name, 0)
	}
}

// isLive tells whether an open ticket is locked by its owner: a ticket
// nobody locks belongs to a waiter or holder that is gone.
func isLive(f *os.File) bool {
	if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return true
}

// checkLocal is nil: a lock directory on a network filesystem is seen as
// its mount's (openLockDir checks its owner and mode).
func checkLocal(string, string) error { return nil }
