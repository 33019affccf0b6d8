package supervise

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// proc is a process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid int
	state     byte
	start     uint64 // start time in clock ticks after boot: with pid, it names one process
	exiting   bool   // in exit already
}

// key names one process for good: a pid with its start time.
type key struct {
	pid   int
	start uint64
}

func (p proc) key() key { return key{p.pid, p.start} }

// table is every process /proc shows now.
func table() []proc {
	ents, _ := os.ReadDir("/proc")
	out := make([]proc, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := stat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// stat reads one process's /proc/PID/stat.
func stat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid pgrp session ... field 22 is starttime. comm may
	// hold spaces and parentheses: the last ')' ends it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return proc{}, false
	}
	p := proc{pid: pid, state: f[0][0]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	p.exiting = flags&pfExiting != 0
	return p, true
}

// pfExiting is the kernel's PF_EXITING: the process is in exit.
const pfExiting = 0x4

// dying is true of a process that no longer needs killing: it is exiting,
// or a fatal signal is on its way (the kernel turns a fatal signal into a
// pending KILL for the whole process at once).
func (p proc) dying() bool {
	if p.state == 'Z' || p.state == 'X' || p.exiting {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/status")
	if err != nil {
		return true // gone
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "SigPnd" || name == "ShdPnd" {
			mask, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if mask&(1<<(unix.SIGKILL-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// descendants is every live process below pid (pid not included), as /proc
// shows them now. Zombies are left out: they are dead, waiting to be
// reaped.
func descendants(pid int) []proc {
	all := table()
	children := map[int][]proc{}
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []proc
	for queue := children[pid]; len(queue) > 0; {
		p := queue[0]
		queue = append(queue[1:], children[p.pid]...)
		if p.state != 'Z' {
			out = append(out, p)
		}
	}
	return out
}
