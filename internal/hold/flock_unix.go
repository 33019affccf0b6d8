//go:build unix

package hold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// flock locks f, waiting as long as it takes.
func flock(f *os.File, how int) error {
	return flockFD(int(f.Fd()), how)
}

func flockFD(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		// Go's runtime interrupts blocked system calls with signals of its
		// own (preemption): EINTR is not an answer.
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// lockAsync starts waiting for a lock on f and reports when it is taken. The
// wait holds a duplicate of f's descriptor: the lock belongs to the open
// file, so it lasts while f (or the duplicate) is open, and a wait that is
// given up takes the lock at most until it closes its duplicate. The
// duplicate is close-on-exec: a wait still going on when a command is
// started under the grant (a pool's waiter waits on every holder, and is
// granted when the first goes) must not hand the command another ticket.
func lockAsync(f *os.File, how int) <-chan error {
	done := make(chan error, 1)
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		done <- err
		return done
	}
	go func() {
		err := flockFD(fd, how)
		unix.Close(fd)
		done <- err
	}()
	return done
}

// waitGone reports when the exclusive lock on f, a live ticket's, is
// gone: its owner was granted, gave up, released or died.
func waitGone(f *os.File) <-chan error { return lockAsync(f, unix.LOCK_SH) }

// flockWait locks f, or gives up when ctx ends.
func flockWait(ctx context.Context, f *os.File, how int) error {
	if unix.Flock(int(f.Fd()), how|unix.LOCK_NB) == nil {
		return nil
	}
	select {
	case err := <-lockAsync(f, how):
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Held is nil while the ticket's lock is still this holder's, else why not.
//
// A flock(2) lock belongs to an open file description, not to a process:
// any process that shares the description (an inherited or passed
// descriptor) drops it with flock(fd, LOCK_UN), for everyone, and a try on
// the same description would only take the lock again and say nothing. So
// the check opens the ticket's file anew, a description of its own (through
// /proc/self/fd; without /proc, by its name in the lock directory, which
// only its owner can replace, and then only if it is still the same file),
// and tries a shared lock without waiting: while the holder's exclusive
// lock stands, that must fail with EWOULDBLOCK. Where /proc/locks names the
// process that took the lock, it must be this one: a lock dropped and taken
// again by someone else is not this holder's. A lock that cannot be checked
// is an error too: nothing then says the device was held to the end.
//
// A lock that stands holds nothing when its file lost its name: waiters
// find holders by name, so a process of the holder's user (the serve) that
// removes or renames the holding file frees the device for the next waiter
// while the lock stands. So the file must still be under its name, with
// one link, and unchanged since it was published: its change time, which
// no one can set back, moves with every rename, link and removal, so a
// name taken away and put back is seen too.
func (t *Ticket) Held() error {
	fd := int(t.file.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("the lock of ticket %s cannot be checked: %v", t.name, err)
	}
	// Waiters find the directory by its path: one renamed away (a lock
	// directory of this user's own, or under a directory of its) is made
	// anew by the next waiter, with no holder in it.
	var dirNow, dirThen unix.Stat_t
	if err := unix.Fstat(t.dir.fd, &dirThen); err != nil {
		return fmt.Errorf("the lock of ticket %s cannot be checked: %v", t.name, err)
	}
	if err := unix.Stat(t.dir.path, &dirNow); err != nil || dirNow.Dev != dirThen.Dev || dirNow.Ino != dirThen.Ino {
		return fmt.Errorf("the lock directory %s is not the directory the ticket %s was taken in any more (it was renamed or removed while held, by a process of its owner's): waiters saw no holder, and the device was free to anyone", t.dir.path, t.name)
	}
	var named unix.Stat_t
	switch err := unix.Fstatat(t.dir.fd, t.name, &named, unix.AT_SYMLINK_NOFOLLOW); {
	case err != nil || named.Dev != st.Dev || named.Ino != st.Ino:
		return fmt.Errorf("the ticket %s is not under its name in the lock directory any more (removed or renamed while held, by a process of its user): waiters saw no holder, and the device was free to anyone", t.name)
	case st.Nlink != 1 || !time.Unix(st.Ctim.Unix()).Equal(t.ctime):
		return fmt.Errorf("the ticket %s was renamed, linked or removed in the lock directory while held (by a process of its user; its file changed at %s): waiters may have seen no holder, and the device was free to anyone", t.name, time.Unix(st.Ctim.Unix()).UTC().Format("15:04:05.000"))
	}
	nfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if nfd, err = t.reopenByName(&st); err != nil {
			return err
		}
	}
	defer unix.Close(nfd)
	err = flockFD(nfd, unix.LOCK_SH|unix.LOCK_NB)
	switch {
	case err == nil:
		return fmt.Errorf("the ticket %s was not locked any more: a process that shared its descriptor unlocked it, and the device was free to anyone", t.name)
	case !errors.Is(err, unix.EWOULDBLOCK):
		return fmt.Errorf("the lock of ticket %s cannot be checked: %v", t.name, err)
	}
	if pid := flockers()[fileID{st.Dev, st.Ino}]; pid > 0 && pid != os.Getpid() {
		return fmt.Errorf("the ticket %s is locked by %s, not by its holder (pid %d): its lock was dropped and taken again", t.name, describe(pid), os.Getpid())
	}
	return nil
}

// reopenByName opens the ticket's file anew by its name in the lock
// directory, and only if it is still the file st describes.
func (t *Ticket) reopenByName(st *unix.Stat_t) (int, error) {
	f, fst, err := t.dir.open(t.name)
	if err != nil {
		return -1, fmt.Errorf("the lock of ticket %s cannot be checked: it cannot be opened anew: %v", t.name, err)
	}
	defer f.Close()
	if fst.id != (fileID{st.Dev, st.Ino}) {
		return -1, fmt.Errorf("the ticket %s was replaced in the lock directory by another file", t.name)
	}
	// A descriptor of its own, for the check to close.
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return -1, fmt.Errorf("the lock of ticket %s cannot be checked: %v", t.name, err)
	}
	return fd, nil
}
