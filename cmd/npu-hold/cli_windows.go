//go:build windows

package main

import (
	"math"
	"os"

	"golang.org/x/sys/windows"
)

// signalGroup passes Ctrl+C and Ctrl+Break (os.Interrupt), and the
// console's close, logoff and shutdown (SIGTERM), on to the command as a
// CTRL_BREAK_EVENT to its process group. The command runs in a process
// group of its own (CREATE_NEW_PROCESS_GROUP, see serve.Start), where the
// console's Ctrl+C does not reach it and only a CTRL_BREAK sent to the
// group does: the group's id is the command's pid. Without a console
// shared with the command (npu-hold run by a service) there is none to
// send, and the stop ends the command with its job.
func signalGroup(pid int, _ os.Signal) {
	windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(pid))
}

// memlockLimit is unlimited: Windows has no RLIMIT_MEMLOCK.
func memlockLimit() uint64 { return math.MaxUint64 }

// consoleIn is the console's input mode as it was before the command ran:
// a command may leave it changed (echo and line input off, virtual
// terminal input on), and takeTerminalBack puts it back.
var consoleIn = struct {
	mode uint32
	ok   bool
}{}

// isTerminal tells whether f is a console, and keeps its mode for
// takeTerminalBack. A Windows console has no foreground process group to
// hand the command: it shares the console.
func isTerminal(f *os.File) bool {
	var mode uint32
	if windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) != nil {
		return false
	}
	consoleIn.mode, consoleIn.ok = mode, true
	return true
}

// takeTerminalBack gives the console back its input mode of before the
// command.
func takeTerminalBack(tty *os.File) {
	if consoleIn.ok {
		windows.SetConsoleMode(windows.Handle(tty.Fd()), consoleIn.mode)
	}
}
