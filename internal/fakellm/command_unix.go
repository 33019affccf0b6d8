//go:build unix

package fakellm

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// stopSignals are the signals that stop the serve: SIGINT, and SIGTERM
// unless ignoreTerm, when SIGTERM is ignored.
func stopSignals(ignoreTerm bool) []os.Signal {
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
		return []os.Signal{syscall.SIGINT}
	}
	return []os.Signal{syscall.SIGINT, syscall.SIGTERM}
}

// stopParentProcess stops the serve's parent (its supervisor) with SIGSTOP.
func stopParentProcess(log io.Writer) {
	ppid := os.Getppid()
	fmt.Fprintf(log, "fakellm: stopping its parent, pid %d (SIGSTOP)\n", ppid)
	syscall.Kill(ppid, syscall.SIGSTOP)
}

// closeStdioFiles closes fds 0, 1 and 2 and opens /dev/null three times,
// so that it takes their numbers.
func closeStdioFiles() error {
	for fd := range 3 {
		syscall.Close(fd)
	}
	for range 3 {
		if _, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
			return err
		}
	}
	return nil
}

// unlockInherited unlocks (flock LOCK_UN) each file of a path open from fd
// 3 up, and says which: a lock taken through a shared open file is dropped
// for every process that shares it. (The runtime's own descriptors, pidfds
// and the like, have no path.)
func unlockInherited(log io.Writer) {
	n := 0
	for fd := 3; fd < 256; fd++ {
		var st syscall.Stat_t
		path, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil || !strings.HasPrefix(path, "/") || syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		if err := syscall.Flock(fd, syscall.LOCK_UN); err == nil {
			fmt.Fprintf(log, "fakellm: unlocked fd %d (%s)\n", fd, path)
			n++
		}
	}
	fmt.Fprintf(log, "fakellm: %d open file(s) unlocked\n", n)
}

// spawnDetached starts a shell that sleeps in a session of its own, the way
// a serve's helper escapes its parent's process group. Its command line
// names the model, so tests can look for it. With printPID (the
// --spawn-breakaway of Windows, where it also asks to leave the job: Linux
// has no job to leave) it says the helper's pid in the log.
func spawnDetached(model string, _ []string, printPID bool, log io.Writer) error {
	attr := &os.ProcAttr{Files: []*os.File{nil, nil, nil}, Sys: &syscall.SysProcAttr{Setsid: true}}
	p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", "sleep 600; : helper of " + model}, attr)
	if err != nil {
		return err
	}
	if printPID {
		fmt.Fprintf(log, "fakellm: helper pid %d, in a session of its own\n", p.Pid)
	}
	return p.Release()
}

// mapFile maps the first page of a file executable and keeps it mapped,
// as the dynamic loader maps a library's code, populated, as running the
// code faults it in: the witnesses count a backend only as an executable
// mapping that holds a page of its file.
func mapFile(file string) (unmap func(), err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, os.Getpagesize(), syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	return func() { syscall.Munmap(b) }, nil
}
