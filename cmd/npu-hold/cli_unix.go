//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalGroup passes a signal npu-hold got on to the command's process
// group.
func signalGroup(pid int, sig os.Signal) { unix.Kill(-pid, sig.(syscall.Signal)) }

// memlockLimit is the RLIMIT_MEMLOCK soft limit, in bytes.
func memlockLimit() uint64 {
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
	return lim.Cur
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// takeTerminalBack makes npu-hold's own process group the terminal's
// foreground group again, once the command it gave the terminal to is done.
func takeTerminalBack(tty *os.File) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	unix.IoctlSetPointerInt(int(tty.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
}
