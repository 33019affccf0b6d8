package hold

import (
	"context"
	"errors"
	"os"

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
// given up takes the lock at most until it closes its duplicate.
func lockAsync(f *os.File, how int) <-chan error {
	done := make(chan error, 1)
	fd, err := unix.Dup(int(f.Fd()))
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
