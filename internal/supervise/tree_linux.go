package supervise

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

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

// PIDs is every pid /proc lists, newest first: a process that forks and
// exits without end (a runaway) is read just after the listing, while it
// still lives, not at the end of a walk it outran. (os.ReadDir would give
// them in the order of their names, oldest first for pids of one length.)
func PIDs() []int {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	slices.SortFunc(pids, func(a, b int) int { return b - a })
	return pids
}

// ReadProc reads a file of /proc that the kernel writes out in one piece,
// a process's stat or status, whole, into buf (grown when it is too small),
// and returns its bytes: open, read, close. A walk of /proc reads one such
// file of every process, and os.ReadFile spends twice the system calls on
// each (an fstat for the size, an attempt to add it to the poller, a read
// of the end of file) and a buffer of its own: where a system call and a
// page of fresh memory are dear (a virtual machine) that is milliseconds a
// walk. Not for a file of many records (/proc/net/tcp): a read of one ends
// between records, short.
func ReadProc(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b := buf[:0]
	if cap(b) == 0 {
		b = make([]byte, 0, 512)
	}
	for {
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		b = b[:len(b)+n]
		// Such a file gives all it holds in one read when the buffer has
		// room: a short read is the whole file.
		if n == 0 || len(b) < cap(b) {
			return b, nil
		}
		b = slices.Grow(b, cap(b))
	}
}

// ProcBuffer is a buffer for ReadProc, taken from a pool and given back
// with Release: the stat of every process of a walk is read into the same
// few.
type ProcBuffer struct{ b []byte }

var procBuffers = sync.Pool{New: func() any { return &ProcBuffer{b: make([]byte, 0, 1024)} }}

// NewProcBuffer takes a buffer from the pool.
func NewProcBuffer() *ProcBuffer { return procBuffers.Get().(*ProcBuffer) }

// Read reads path as ReadProc does. The bytes are the buffer's, good until
// its next Read or its Release.
func (p *ProcBuffer) Read(path string) ([]byte, error) {
	b, err := ReadProc(path, p.b)
	if cap(b) > cap(p.b) {
		p.b = b[:0]
	}
	return b, err
}

// Release gives the buffer back to the pool.
func (p *ProcBuffer) Release() { procBuffers.Put(p) }

// stat reads one process's /proc/PID/stat.
func stat(pid int) (proc, bool) {
	buf := NewProcBuffer()
	defer buf.Release()
	b, err := buf.Read("/proc/" + strconv.Itoa(pid) + "/stat")
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
	buf := NewProcBuffer()
	defer buf.Release()
	b, err := buf.Read("/proc/" + strconv.Itoa(p.pid) + "/status")
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

// below is every live process of all below pid (pid not included).
func below(pid int, all []proc) []proc {
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

// killBelow sends KILL to every live process below pid, adding each that
// was not dying already to seen. A child of pid (where every orphan of the
// tree comes back: the supervisor is a subreaper) is killed the moment it
// is read, newest first: a runaway that forks and exits every few
// milliseconds is hit while it lives, not after a walk of /proc that it
// outran (a walk of a thousand entries on a loaded machine takes longer
// than one of its generations).
func killBelow(pid int, seen map[key]bool) {
	pids := PIDs()
	all := make([]proc, 0, len(pids))
	kill := func(p proc) {
		if !p.dying() {
			seen[p.key()] = true
		}
		unix.Kill(p.pid, unix.SIGKILL)
	}
	for _, n := range pids {
		p, ok := stat(n)
		if !ok {
			continue
		}
		if p.ppid == pid && p.state != 'Z' {
			kill(p)
			p.state = 'Z' // killed: below need not kill it again
		}
		all = append(all, p)
	}
	for _, p := range below(pid, all) {
		kill(p)
	}
}
