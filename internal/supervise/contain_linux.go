package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/stage1"
)

// Mechanisms that hold a serve's tree, in the order "auto" tries them.
var Mechanisms = []string{"cgroup2", "freezer", "descendants"}

// container holds the serve and everything it starts so that they can be
// killed as one.
type container interface {
	name() string
	path() string // the cgroup; "" for none
	// start runs fork so that the process it makes is born inside.
	start(fork func() (int, error)) (int, error)
	// kill kills every member, adding each live one to seen.
	kill(seen map[key]bool)
	// members is how many processes are inside now, zombies left out.
	members() int
	// close removes what the container made, once it is empty.
	close() error
}

// makers make the cgroups a serve can be held in; onHost's make them on
// this machine, tests give their own.
type makers struct {
	cgroup2, freezer func(self int) (*cgroup, error)
}

var onHost = makers{cgroup2: newCgroup2, freezer: newFreezer}

// choose is the container want names, or with "auto" the first of
// Mechanisms that works here; why says what the ones before it lacked.
func choose(want string, self int) (c container, why []string, err error) {
	return onHost.choose(want, self)
}

func (mk makers) choose(want string, self int) (c container, why []string, err error) {
	if err := CheckContain(want); err != nil {
		return nil, nil, err
	}
	for _, m := range Mechanisms {
		if want != "" && want != "auto" && want != m {
			continue
		}
		switch m {
		case "cgroup2":
			c, err = mk.cgroup2(self)
		case "freezer":
			c, err = mk.freezer(self)
		default:
			c, err = descendantsOnly{}, nil
		}
		if err == nil {
			return c, why, nil
		}
		if want == m {
			return nil, nil, fmt.Errorf("%s=%s: %v", ContainEnv, m, err)
		}
		why = append(why, m+": "+err.Error())
	}
	return nil, why, errors.New("no mechanism to hold the serve")
}

// descendantsOnly is no container: the stop kills the supervisor's
// descendants, as /proc shows them, until none is left. A subreaper's
// orphans come back to it, so none can leave the tree.
type descendantsOnly struct{}

func (descendantsOnly) name() string                                { return "descendants" }
func (descendantsOnly) path() string                                { return "" }
func (descendantsOnly) start(fork func() (int, error)) (int, error) { return fork() }
func (descendantsOnly) kill(map[key]bool)                           {}
func (descendantsOnly) members() int                                { return 0 }
func (descendantsOnly) close() error                                { return nil }

// cgroup is a cgroup made for one serve, below the supervisor's own.
type cgroup struct {
	kind   string // cgroup2 or freezer
	parent string // the supervisor's cgroup, where it returns after the fork
	dir    string
}

func (c *cgroup) name() string { return c.kind }
func (c *cgroup) path() string { return c.dir }

// newCgroup2 makes a cgroup v2 for the serve where this process may: its
// own cgroup delegated to its user, or any as root. Killing one is a single
// write to cgroup.kill (Linux 5.14).
func newCgroup2(self int) (*cgroup, error) {
	rel, err := ownCgroup(func(controllers string) bool { return controllers == "" }, "0")
	if err != nil {
		return nil, err
	}
	mnt, root, err := cgroupMount(func(fstype, opts string) bool { return fstype == "cgroup2" })
	if err != nil {
		return nil, err
	}
	c, err := makeCgroup("cgroup2", under(mnt, root, rel), self)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.dir, "cgroup.kill")); err != nil {
		c.close()
		return nil, errors.New("the kernel has no cgroup.kill (Linux 5.14 or later)")
	}
	return c, nil
}

// newFreezer makes a cgroup v1 in the freezer hierarchy for the serve.
// Frozen, a member cannot fork; KILL reaches each when thawed.
func newFreezer(self int) (*cgroup, error) {
	rel, err := ownCgroup(func(controllers string) bool {
		for _, c := range strings.Split(controllers, ",") {
			if c == "freezer" {
				return true
			}
		}
		return false
	}, "")
	if err != nil {
		return nil, err
	}
	mnt, root, err := cgroupMount(func(fstype, opts string) bool {
		return fstype == "cgroup" && strings.Contains(","+opts+",", ",freezer,")
	})
	if err != nil {
		return nil, err
	}
	return makeCgroup("freezer", under(mnt, root, rel), self)
}

// makeCgroup makes parent/npu-serve-smoke-PID and checks that this process
// can move itself in and back, as start does around the fork.
func makeCgroup(kind, parent string, self int) (*cgroup, error) {
	removeStale(parent)
	c := &cgroup{kind: kind, parent: parent, dir: filepath.Join(parent, "npu-serve-smoke-"+strconv.Itoa(self))}
	err := os.Mkdir(c.dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		// No other live supervisor goes by this pid: a supervisor of an
		// earlier life of it, or a serve whose user owns the parent, left
		// it. Empty (no process in it or below), it goes, and this one
		// makes its own; with a process in it, the mechanism is not used.
		budget := staleBudget
		rmdirBounded(c.dir, &budget)
		err = os.Mkdir(c.dir, 0o755)
	}
	if err != nil {
		switch {
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return nil, fmt.Errorf("%s is not writable by uid %d (its cgroup is not delegated to it)", parent, os.Geteuid())
		case errors.Is(err, syscall.EROFS):
			return nil, fmt.Errorf("%s is on a read-only mount", parent)
		}
		return nil, fmt.Errorf("cannot make a cgroup: %w", err)
	}
	if err := c.enter(); err != nil {
		c.close()
		return nil, err
	}
	if err := c.leave(); err != nil {
		// Stuck inside: a stop would freeze and kill the supervisor too.
		return nil, err
	}
	return c, nil
}

func (c *cgroup) enter() error {
	return stage1.WriteCgroupFile(filepath.Join(c.dir, "cgroup.procs"), strconv.Itoa(os.Getpid()))
}
func (c *cgroup) leave() error {
	return stage1.WriteCgroupFile(filepath.Join(c.parent, "cgroup.procs"), strconv.Itoa(os.Getpid()))
}

// start moves the supervisor into the cgroup for the length of the fork:
// the serve is born inside, before it can run a single instruction.
func (c *cgroup) start(fork func() (int, error)) (int, error) {
	if err := c.enter(); err != nil {
		return 0, fmt.Errorf("entering %s: %w", c.dir, err)
	}
	pid, err := fork()
	if lerr := c.leave(); lerr != nil {
		if pid > 0 {
			unix.Kill(pid, unix.SIGKILL)
		}
		return 0, fmt.Errorf("leaving %s: %w", c.dir, lerr)
	}
	return pid, err
}

// kill freezes the cgroup, so that no member can fork while they are
// counted, then kills them all.
func (c *cgroup) kill(seen map[key]bool) {
	// The serve's user owns the cgroup and may have moved the supervisor
	// into it: out first, or the freeze would stop the supervisor too.
	c.leave()
	if c.kind == "cgroup2" {
		stage1.WriteCgroupFile(filepath.Join(c.dir, "cgroup.freeze"), "1")
		c.waitFrozen(func() bool { return eventsSay(filepath.Join(c.dir, "cgroup.events"), "frozen 1") })
		c.note(seen)
		// Frozen members die of KILL in cgroup v2.
		stage1.WriteCgroupFile(filepath.Join(c.dir, "cgroup.kill"), "1")
		stage1.WriteCgroupFile(filepath.Join(c.dir, "cgroup.freeze"), "0")
		return
	}
	stage1.WriteCgroupFile(filepath.Join(c.dir, "freezer.state"), "FROZEN")
	c.waitFrozen(func() bool {
		b, _ := os.ReadFile(filepath.Join(c.dir, "freezer.state"))
		return strings.TrimSpace(string(b)) == "FROZEN"
	})
	for _, p := range c.note(seen) {
		unix.Kill(p.pid, unix.SIGKILL)
	}
	// A frozen task acts on KILL once thawed.
	stage1.WriteCgroupFile(filepath.Join(c.dir, "freezer.state"), "THAWED")
}

// waitFrozen waits for frozen, up to a second: a task asleep in a driver
// may not freeze, and is killed anyway.
func (c *cgroup) waitFrozen(frozen func() bool) {
	for deadline := time.Now().Add(time.Second); !frozen() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// note adds the cgroup's live members to seen and returns them.
func (c *cgroup) note(seen map[key]bool) []proc {
	var out []proc
	for _, pid := range readPIDs(filepath.Join(c.dir, "cgroup.procs")) {
		if p, ok := stat(pid); ok && p.state != 'Z' {
			if !p.dying() {
				seen[p.key()] = true
			}
			out = append(out, p)
		}
	}
	return out
}

func (c *cgroup) members() int {
	n := 0
	for _, pid := range readPIDs(filepath.Join(c.dir, "cgroup.procs")) {
		if p, ok := stat(pid); ok && p.state != 'Z' {
			n++
		}
	}
	return n
}

// close removes the cgroup; a member that is still leaving can hold it a
// moment.
func (c *cgroup) close() error {
	var err error
	for range 100 {
		if err = rmdirAll(c.dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("removing %s: %w", c.dir, err)
}

// rmdirAll removes a cgroup and the cgroups the serve made below it (the
// serve's user owns its cgroup and may make them), deepest first. A cgroup
// holds no files to remove: rmdir alone removes it once it is empty.
func rmdirAll(dir string) error {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			rmdirAll(filepath.Join(dir, e.Name()))
		}
	}
	return syscall.Rmdir(dir)
}

// removeStale removes the empty cgroups of supervisors that are gone
// (killed themselves before they could remove theirs). A cgroup with a
// process in it cannot be removed, so nothing alive is touched. It looks
// at staleBudget entries at most, those below a stale cgroup included: a
// serve that owns the parent can leave any number of them, and a
// supervisor's start (or, after its first stage, its stop) must not wait on
// them all; what is left is the next supervisor's.
func removeStale(parent string) {
	d, err := os.Open(parent)
	if err != nil {
		return
	}
	defer d.Close()
	budget := staleBudget
	for budget > 0 {
		ents, err := d.ReadDir(min(budget, 256))
		for _, e := range ents {
			budget--
			rest, ok := strings.CutPrefix(e.Name(), "npu-serve-smoke-")
			pid, perr := strconv.Atoi(rest)
			if !ok || perr != nil || !e.IsDir() {
				continue
			}
			if _, alive := stat(pid); !alive {
				rmdirBounded(filepath.Join(parent, e.Name()), &budget)
			}
		}
		if err != nil {
			return
		}
	}
}

// staleBudget bounds removeStale's work: some 70 µs an entry on a small
// virtual machine, so at most some 70 ms.
const staleBudget = 1024

// rmdirBounded is rmdirAll, each directory read or removed taken from
// budget, and nothing more done once it is spent.
func rmdirBounded(dir string, budget *int) {
	if *budget <= 0 {
		return
	}
	*budget--
	if d, err := os.Open(dir); err == nil {
		ents, _ := d.ReadDir(max(*budget, 1))
		d.Close()
		for _, e := range ents {
			if e.IsDir() {
				rmdirBounded(filepath.Join(dir, e.Name()), budget)
			}
		}
	}
	syscall.Rmdir(dir)
}

// ownCgroup is this process's path in the hierarchy whose /proc/self/cgroup
// line has the given id ("0" for cgroup v2) or controllers.
func ownCgroup(controllers func(string) bool, id string) (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	return ownCgroupIn(b, controllers, id)
}

// ownCgroupIn is ownCgroup in the contents of /proc/self/cgroup.
func ownCgroupIn(b []byte, controllers func(string) bool, id string) (string, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && (id == "" || f[0] == id) && controllers(f[1]) {
			return f[2], nil
		}
	}
	return "", errors.New("this process is in no such hierarchy (/proc/self/cgroup)")
}

// cgroupMount is where the hierarchy is mounted, and the cgroup its root
// shows (not "/" inside a cgroup namespace or a container).
func cgroupMount(match func(fstype, opts string) bool) (mnt, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	return cgroupMountIn(f, match)
}

// cgroupMountIn is cgroupMount in the contents of /proc/self/mountinfo.
func cgroupMountIn(r io.Reader, match func(fstype, opts string) bool) (mnt, root string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 6 || len(b) < 3 || !match(b[0], b[2]) {
			continue
		}
		if strings.Contains(","+a[5]+",", ",ro,") {
			return "", "", fmt.Errorf("%s is mounted read-only", unescape(a[4]))
		}
		return unescape(a[4]), unescape(a[3]), nil
	}
	return "", "", errors.New("the hierarchy is not mounted (/proc/self/mountinfo)")
}

// under is where cgroup rel is, for a hierarchy mounted at mnt showing
// root.
func under(mnt, root, rel string) string {
	if root != "/" {
		rel = strings.TrimPrefix(rel, root)
	}
	return filepath.Join(mnt, rel)
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func readPIDs(file string) []int {
	b, _ := os.ReadFile(file)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// eventsSay is true when a cgroup.events file holds line.
func eventsSay(file, line string) bool {
	b, _ := os.ReadFile(file)
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// Available says why mechanism m cannot hold a serve here; nil when it can.
// It makes a cgroup and removes it again.
func Available(m string) error {
	c, _, err := choose(m, os.Getpid())
	if err != nil {
		return err
	}
	return c.close()
}
