package serve

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// Proc is a process as /proc shows it.
type Proc struct {
	PID, PPID, PGID, SID int
	State                byte
	Start                uint64 // start time in clock ticks after boot: with PID, it names one process
	Command              string // its command line, cut to 200 bytes
}

func (p Proc) String() string { return fmt.Sprintf("pid %d (%s)", p.PID, p.Command) }

// List is every process /proc shows.
func List() []Proc {
	var out []Proc
	for _, pid := range supervise.PIDs() {
		if p, ok := Stat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// Stat reads one process from /proc.
func Stat(pid int) (Proc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, false
	}
	// pid (comm) state ppid pgrp session ... field 22 is starttime. comm may
	// hold spaces and parentheses: the last ')' ends it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Proc{}, false
	}
	comm := string(b[bytes.IndexByte(b, '(')+1 : i])
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return Proc{}, false
	}
	p := Proc{PID: pid, State: f[0][0]}
	p.PPID, _ = strconv.Atoi(f[1])
	p.PGID, _ = strconv.Atoi(f[2])
	p.SID, _ = strconv.Atoi(f[3])
	p.Start, _ = strconv.ParseUint(f[19], 10, 64)
	p.Command = comm
	if cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(cl) > 0 {
		p.Command = strings.TrimSpace(string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	if len(p.Command) > 200 {
		p.Command = p.Command[:200]
	}
	return p, true
}

// Descendants is every process below pid, pid itself included, as /proc
// shows them now.
func Descendants(pid int) []Proc {
	all := List()
	children := map[int][]Proc{}
	var out []Proc
	for _, p := range all {
		children[p.PPID] = append(children[p.PPID], p)
		if p.PID == pid {
			out = append(out, p)
		}
	}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].PID]...)
	}
	return out
}

// Listeners is every process that holds a socket listening on TCP port.
func Listeners(port int) []Proc {
	procs, _ := listeners(port)
	return procs
}

// listeners is every process this user can see that holds a socket
// listening on TCP port, and the owners (uids) of the listening sockets no
// process it can see holds: another user's (whose descriptors only root may
// read), or hidden by /proc's hidepid or a PID namespace.
func listeners(port int) (procs []Proc, unseen []int) {
	inodes := map[string]int{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(f, port, inodes)
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	seen := map[int]bool{}
	found := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		inode := strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")
		if _, ok := inodes[inode]; !ok {
			continue
		}
		found[inode] = true
		pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if p, ok := Stat(pid); ok {
			procs = append(procs, p)
		}
	}
	for inode, uid := range inodes {
		if !found[inode] && !slices.Contains(unseen, uid) {
			unseen = append(unseen, uid)
		}
	}
	slices.Sort(unseen)
	return procs, unseen
}

// listeningInodes adds the inodes of sockets in LISTEN state on port, and
// their owners' uids.
func listeningInodes(path string, port int, into map[string]int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" { // 0A: LISTEN
			continue
		}
		_, hexPort, ok := strings.Cut(fs[1], ":")
		b, err := hex.DecodeString(hexPort)
		if !ok || err != nil || len(b) != 2 || int(b[0])<<8|int(b[1]) != port {
			continue
		}
		uid, _ := strconv.Atoi(fs[7])
		into[fs[9]] = uid
	}
}
