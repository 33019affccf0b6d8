// Package stage1 is the supervisor's first stage: in the common case (a
// cgroup v2 the supervisor may make, "auto" or "cgroup2", a serve found on
// an absolute PATH), it starts the serve from an init that runs early in
// the binary's start, and the supervisor (package supervise) takes over
// from there. In every other case it leaves the start to the supervisor,
// which starts the serve as it always has.
//
// Why an init of its own: the gate waits for the serve's spawn, and the
// supervisor's start is most of that wait. Go initializes, at each step,
// the package that comes first by import path among those whose imports
// are initialized; this one imports only os, os/signal, runtime, strconv,
// syscall and time, so it is ready, and runs, after some twenty packages
// (GODEBUG=inittrace=1), where the supervisor's own code comes after some
// seventy (crypto, compress and encoding sort before github.com and go
// first). It uses no strings, bufio or path/filepath for that reason: a
// package importing strings comes 57th. docs/benchmarks.md has the figures.
//
// What it does is what the supervisor does, in the same order, and nothing
// more: TERM, INT and HUP caught (handed to the supervisor, so that a stop
// asked for in the first milliseconds is not lost), a child subreaper,
// the serve's path found by exec.LookPath's rules, a cgroup made below the
// supervisor's own (one with cgroup.kill), the held descriptors closed on
// exec, and the serve forked inside it from the main thread (which lives
// until the supervisor exits: the serve's parent-death signal is that
// thread's) in a process group of its own. Then the Started event, written
// by hand exactly as encoding/json writes it (supervise's tests hold the
// two to the byte). Whatever it cannot do exactly so, it declines, before
// it has made anything or after removing what it made.
package stage1

import (
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// What the first stage did, for the supervisor, which runs after it in the
// same process.
var (
	// Signals has TERM, INT and HUP from the first stage's start; nil
	// when this process was not started as a supervisor.
	Signals chan os.Signal
	// Started is the serve the first stage started; nil when it declined.
	Started *Serve
	// Declined says why the first stage left the start to the supervisor.
	Declined string
)

// Serve is the serve the first stage started.
type Serve struct {
	PID    int
	At     time.Time // just before the fork
	Parent string    // the supervisor's cgroup
	Dir    string    // the serve's cgroup
	// Sent is false when the Started event did not reach the gate (it is
	// gone).
	Sent bool
	// LeaveErr is set when the supervisor could not move back out of the
	// serve's cgroup after the fork: the serve, if forked, is killed, and
	// the start has failed (the supervisor says so, as it would have).
	LeaveErr error
}

func init() {
	if len(os.Args) < 2 || os.Args[1] != Command {
		return
	}
	// Caught before anything is started: a TERM in the first milliseconds
	// (the gate died) would otherwise kill the supervisor with the serve
	// just forked, and what the serve starts would outlive it.
	Signals = make(chan os.Signal, 4)
	signal.Notify(Signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	Started, Declined = start(os.Args[2:], os.Getenv)
}

// start starts the serve, or says why it leaves that to the supervisor.
func start(args []string, getenv func(string) string) (*Serve, string) {
	argv, held, why := Parse(args, getenv)
	if why != "" {
		return nil, why
	}
	var st syscall.Stat_t
	if syscall.Fstat(ControlFD, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return nil, "fd 3 is not a socket"
	}
	path, found, why := LookPath(argv[0], getenv("PATH"))
	if why != "" {
		return nil, why
	}
	if !found {
		return nil, argv[0] + " is not found, or not executable"
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err.Error()
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err.Error()
	}
	parent, why := CgroupParent(string(cg), string(mi))
	if why != "" {
		return nil, why
	}
	self := strconv.Itoa(os.Getpid())
	dir := parent + "/npu-serve-smoke-" + self
	if !JSONSafe(dir) {
		return nil, "the cgroup's path has a byte JSON escapes"
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0, 0, 0, 0); e != 0 {
		return nil, "cannot become a child subreaper: " + e.Error()
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err.Error()
	}
	if _, err := os.Stat(dir + "/cgroup.kill"); err != nil {
		syscall.Rmdir(dir)
		return nil, "no cgroup.kill"
	}
	if err := WriteCgroupFile(dir+"/cgroup.procs", self); err != nil {
		syscall.Rmdir(dir)
		return nil, err.Error()
	}
	// None of the supervisor's descriptors reaches the serve (package
	// supervise says why).
	for fd := ControlFD; fd < HeldFD+held; fd++ {
		syscall.CloseOnExec(fd)
	}
	// The main thread, locked to this goroutine for good: the supervisor
	// runs on it until it exits, and the serve's parent-death signal fires
	// when the thread that forked it ends (go.dev/issue/27505).
	runtime.LockOSThread()
	at := time.Now()
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if lerr := WriteCgroupFile(parent+"/cgroup.procs", self); lerr != nil {
		// Stuck inside: the supervisor reports the start failed, as it
		// would have.
		if err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return &Serve{Parent: parent, Dir: dir, LeaveErr: lerr}, ""
	}
	if err != nil {
		// The supervisor tries again, and reports the error as it does.
		runtime.UnlockOSThread()
		syscall.Rmdir(dir)
		return nil, "the fork failed: " + err.Error()
	}
	s := &Serve{PID: pid, At: at, Parent: parent, Dir: dir}
	line := StartedLine(pid, at.UnixNano(), dir)
	n, werr := syscall.Write(ControlFD, line)
	s.Sent = werr == nil && n == len(line)
	return s, ""
}

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER

// Parse reads the supervisor's command line as the gate writes it
// ("[--held N] [--contain M] -- ARGV..."): the serve's argv, and how many
// descriptors from HeldFD the supervisor holds. why is not "" when the
// first stage leaves the start to the supervisor: another form, another
// mechanism, a terminal to hand over.
func Parse(args []string, getenv func(string) string) (argv []string, held int, why string) {
	contain, dashes := "", false
	for i := 0; i < len(args) && !dashes; i++ {
		switch a := args[i]; {
		case a == "--":
			argv, dashes = args[i+1:], true
		case a == "--held" && i+1 < len(args):
			// As the flag package reads it only where it is written as
			// strconv.Itoa writes it (not 010, 0x8 or 1_0).
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 0 || strconv.Itoa(n) != args[i+1] {
				return nil, 0, "--held " + args[i+1]
			}
			held = n
			i++
		case a == "--contain" && i+1 < len(args):
			contain = args[i+1]
			i++
		default:
			return nil, 0, "the argument " + a
		}
	}
	if !dashes || len(argv) == 0 {
		return nil, 0, "no serve after --"
	}
	if contain == "" {
		contain = getenv(ContainEnv)
	}
	if contain != "" && contain != "auto" && contain != "cgroup2" {
		return nil, 0, "the mechanism " + contain
	}
	return argv, held, ""
}

// LookPath finds file as exec.LookPath does: a name with a slash as it is,
// else the first executable in pathEnv's directories. found is false when
// exec.LookPath finds nothing; why is not "" where the answer would depend
// on a rule of exec.LookPath's this does not repeat (a relative or empty
// PATH entry, one that is not clean).
func LookPath(file, pathEnv string) (path string, found bool, why string) {
	switch file {
	case "", ".", "..":
		return "", false, ""
	}
	if index(file, "/") >= 0 {
		return file, executable(file), ""
	}
	if pathEnv == "" {
		return "", false, ""
	}
	for _, dir := range split(pathEnv, ':') {
		if !clean(dir) {
			return "", false, "the PATH entry \"" + dir + "\""
		}
		p := dir + "/" + file
		if dir == "/" {
			p = "/" + file
		}
		if executable(p) {
			return p, true, ""
		}
	}
	return "", false, ""
}

// executable is exec.LookPath's test of a candidate: it exists, is not a
// directory, and the effective user may execute it (the permission bits
// where the kernel cannot say).
func executable(file string) bool {
	var st syscall.Stat_t
	for {
		err := syscall.Stat(file, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		break
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return false
	}
	err := syscall.Faccessat(atFDCWD, file, 1 /* X_OK */, atEACCESS)
	if err == nil {
		return true
	}
	if err != syscall.ENOSYS && err != syscall.EPERM {
		return false
	}
	return st.Mode&0o111 != 0
}

const (
	atFDCWD   = -0x64
	atEACCESS = 0x200
)

// CgroupParent is the supervisor's cgroup v2 directory, from the contents
// of /proc/self/cgroup and /proc/self/mountinfo, as the supervisor finds
// it; why is not "" where there is none, or the files hold what only the
// supervisor reads (a mount showing a subtree, an escaped mount point).
func CgroupParent(cgroupFile, mountinfo string) (dir, why string) {
	rel := ""
	for _, line := range split(cgroupFile, '\n') {
		if len(line) > 3 && line[:3] == "0::" {
			rel = line[3:]
			break
		}
	}
	// strings.TrimSpace, which the supervisor's reading applies to the
	// whole file, would cut a space at the end of the last line's path.
	if !clean(rel) || asciiSpace(rel[len(rel)-1]) {
		return "", "no clean cgroup v2 path in /proc/self/cgroup"
	}
	mnt := ""
	for _, line := range split(mountinfo, '\n') {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		i := index(line, " - ")
		if i < 0 {
			continue
		}
		a, b := fields(line[:i]), fields(line[i+3:])
		if len(a) < 5 || len(b) < 3 || b[0] != "cgroup2" {
			continue
		}
		switch {
		case len(a) < 6:
			return "", "a short mountinfo line"
		case index(","+a[5]+",", ",ro,") >= 0:
			return "", "cgroup v2 is mounted read-only"
		case a[3] != "/":
			return "", "the cgroup v2 mount shows a subtree"
		case index(a[4], `\`) >= 0, !clean(a[4]), a[4] == "/":
			return "", "the cgroup v2 mount point " + a[4]
		}
		mnt = a[4]
		break
	}
	if mnt == "" {
		return "", "no cgroup v2 mount"
	}
	if rel == "/" {
		return mnt, ""
	}
	return mnt + rel, ""
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// clean is true of an absolute path that path/filepath.Clean leaves as it
// is: no empty, "." or ".." element, no slash at the end but the root's.
func clean(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || p[0] != '/' {
		return false
	}
	for _, e := range split(p[1:], '/') {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return true
}

// StartedLine is the Started event encoding/json writes for a serve held
// in a cgroup v2 the first stage made, with its newline. dir must be
// JSONSafe.
func StartedLine(pid int, startedNS int64, dir string) []byte {
	return []byte(`{"kind":"started","pid":` + strconv.Itoa(pid) + `,"started_ns":` + strconv.FormatInt(startedNS, 10) +
		`,"contain":"cgroup2","cgroup":"` + dir + `","early":true}` + "\n")
}

// JSONSafe is true of a string encoding/json writes as it is between
// quotes: ASCII from the space on, less the quote, the backslash and the
// HTML characters it escapes.
func JSONSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c > 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// WriteCgroupFile writes s to a cgroup file, which must exist (os.WriteFile
// would create a plain file in a directory that is not a cgroup).
func WriteCgroupFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// The string helpers below are strings' (this package imports no strings,
// see the package's comment).

func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func split(s string, sep byte) []string {
	var out []string
	for {
		i := 0
		for i < len(s) && s[i] != sep {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			return out
		}
		s = s[i+1:]
	}
}

// fields is strings.Fields for lines that separate fields by one space
// (mountinfo escapes the spaces, tabs and newlines in a field).
func fields(s string) []string {
	var out []string
	for _, f := range split(s, ' ') {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
