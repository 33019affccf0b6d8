package serve

import "fmt"

// Proc is a process as /proc shows it. On Windows (a toolhelp snapshot)
// PGID and SID are 0, State is 'R', Start is the creation time (100 ns
// since 1601) where the process could be opened, else 0, and Command is
// the command line where this user may read it, else the image's path, else
// the image's name: Windows does not show another user's command line.
type Proc struct {
	PID, PPID, PGID, SID int
	State                byte
	Start                uint64 // start time in clock ticks after boot: with PID, it names one process
	Command              string // its command line, cut to 200 bytes
}

func (p Proc) String() string { return fmt.Sprintf("pid %d (%s)", p.PID, p.Command) }
