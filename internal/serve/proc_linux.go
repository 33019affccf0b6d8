package serve

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// List is every process /proc shows, with its command line.
func List() []Proc {
	var out []Proc
	for _, pid := range supervise.PIDs() {
		if p, ok := Stat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// snapshot is every process /proc shows, without command lines (Command
// is the short name the kernel keeps): half the reads of List, for the
// walks that only need the tree. withCommand adds the command line to a
// process that is shown to a person.
//
// The reads are shared among up to GOMAXPROCS goroutines (at most
// snapshotWorkers), each taking every n-th process: a walk is a few
// system calls a process, some 20-40 µs each on a small virtual machine,
// and a runner's machine runs hundreds of processes. The order is /proc's,
// as one goroutine would have it.
func snapshot() []Proc {
	pids := supervise.PIDs()
	got := make([]Proc, len(pids))
	n := min(runtime.GOMAXPROCS(0), snapshotWorkers, len(pids)/snapshotShare+1)
	var wg sync.WaitGroup
	for w := 1; w < n; w++ {
		wg.Go(func() { statEvery(pids, got, w, n) })
	}
	statEvery(pids, got, 0, n)
	wg.Wait()
	out := got[:0]
	for _, p := range got {
		if p.PID != 0 {
			out = append(out, p)
		}
	}
	return out
}

// snapshotWorkers bounds the goroutines of a walk; snapshotShare is the
// fewest processes worth one more.
const (
	snapshotWorkers = 8
	snapshotShare   = 16
)

// statEvery reads the processes pids[from], pids[from+step], ... into got
// at the same index; one that is gone is left zero.
func statEvery(pids []int, got []Proc, from, step int) {
	for i := from; i < len(pids); i += step {
		if p, ok := stat(pids[i]); ok {
			got[i] = p
		}
	}
}

// Stat reads one process from /proc, with its command line.
func Stat(pid int) (Proc, bool) {
	p, ok := stat(pid)
	if ok {
		p = withCommand(p)
	}
	return p, ok
}

// stat reads one process's /proc/PID/stat.
func stat(pid int) (Proc, bool) {
	buf := supervise.NewProcBuffer()
	defer buf.Release()
	b, err := buf.Read("/proc/" + strconv.Itoa(pid) + "/stat")
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
	return p, true
}

// withCommand gives p its command line, cut to 200 bytes, where /proc
// still has one (a zombie's is empty: it keeps its short name).
func withCommand(p Proc) Proc {
	if cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID)); err == nil && len(cl) > 0 {
		p.Command = strings.TrimSpace(string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	if len(p.Command) > 200 {
		p.Command = p.Command[:200]
	}
	return p
}

// Descendants is every process below pid, pid itself included, as /proc
// shows them now, without command lines (see snapshot). It follows each
// thread's children (/proc/PID/task/TID/children: a process's children
// are listed under the thread that forked them), a few reads for a serve's
// tree where a walk of /proc reads every process on the machine. A child
// whose thread exits moves to another thread, perhaps one not yet read or
// not yet listed: where a process's threads changed while they were read,
// or a list may have come in more than one read, it walks /proc instead,
// as it does where the kernel keeps no such files (CONFIG_PROC_CHILDREN).
func Descendants(pid int) []Proc {
	if !childrenFiles() {
		return below(snapshot(), pid)
	}
	root, ok := stat(pid)
	if !ok {
		return nil
	}
	out := []Proc{root}
	seen := map[int]bool{pid: true}
	for i := 0; i < len(out); i++ {
		kids, ok := children(out[i].PID)
		if !ok {
			return below(snapshot(), pid)
		}
		for _, c := range kids {
			// A pid listed as its child and reused since is not.
			if pr, ok := stat(c); ok && !seen[c] && pr.PPID == out[i].PID {
				seen[c] = true
				out = append(out, pr)
			}
		}
	}
	return out
}

// childrenFiles says whether /proc has each thread's children file.
var childrenFiles = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/children")
	return err == nil
})

// children is the pids of pid's children, from each of its threads'
// children files, with ok false where that reading may have missed one: a
// thread exited, or came, while they were read (its children move to
// another), or a list filled a read (more may have come in a second, after
// entries before it left). A process gone is none, and ok.
func children(pid int) (out []int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, err := taskIDs(dir)
	if err != nil {
		return nil, true
	}
	var buf [4096]byte
	for _, tid := range tids {
		b, err := readOnce(dir+tid+"/children", buf[:])
		if err != nil || len(b) >= childrenRead {
			return nil, false
		}
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
	}
	again, err := taskIDs(dir)
	if err != nil {
		return nil, true // gone meanwhile: its children came to the subreaper
	}
	return out, slices.Equal(tids, again)
}

// childrenRead is the most a children file gives in one read (a page of
// the kernel's): a list that fills it may have more.
const childrenRead = 4000

// readOnce is one read of a file into buf.
func readOnce(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// taskIDs is the names in a process's task directory, sorted.
func taskIDs(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// below is every process of all below pid, pid itself included.
func below(all []Proc, pid int) []Proc {
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
	inodes := listeningSockets(port)
	if len(inodes) == 0 {
		return nil, nil
	}
	return holders(inodes, supervise.PIDs())
}

// listeningSockets is the inodes of the sockets listening on TCP port, and their
// owners' uids: asked of the kernel (sock_diag), else read from
// /proc/net/tcp and tcp6.
func listeningSockets(port int) map[string]int {
	inodes := map[string]int{}
	if listeningInodesDiag(port, inodes) != nil {
		clear(inodes)
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			listeningInodes(f, port, inodes)
		}
	}
	return inodes
}

// holders is the processes of pids that hold one of inodes, and the
// owners of the inodes none of them holds.
func holders(inodes map[string]int, pids []int) (procs []Proc, unseen []int) {
	found := map[string]bool{}
	var fds fdReader
	for _, pid := range pids {
		holds := false
		fds.sockets(pid, func(inode string) {
			if _, ok := inodes[inode]; ok {
				found[inode], holds = true, true
			}
		})
		if !holds {
			continue
		}
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

// fdReader reads the descriptors of processes, its buffers kept from one
// process to the next: a look for a socket's holders reads every
// descriptor of every process it can see, and does it in as few system
// calls as it can (the directory opened once, each link read relative to
// it).
type fdReader struct {
	dirents, link []byte
}

// sockets calls found with the inode of each socket pid holds, as far as
// this user may read its descriptors.
func (r *fdReader) sockets(pid int, found func(inode string)) {
	if r.dirents == nil {
		r.dirents, r.link = make([]byte, 8192), make([]byte, 64)
	}
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(dir)
	var names []string
	for {
		n, err := unix.Getdents(dir, r.dirents)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		_, _, names = unix.ParseDirent(r.dirents[:n], -1, names[:0])
		for _, name := range names {
			n, err := unix.Readlinkat(dir, name, r.link)
			if err != nil {
				continue
			}
			// socket:[INODE]; a link that filled the buffer is no socket's.
			if target := string(r.link[:n]); n < len(r.link) && strings.HasPrefix(target, "socket:[") && strings.HasSuffix(target, "]") {
				found(target[len("socket:[") : len(target)-1])
			}
		}
	}
}

// readNames is the names in dir, unsorted.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
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
