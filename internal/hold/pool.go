package hold

import (
	"sync"
	"syscall"

	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Pool is a set of devices of one kind on a host, shared through one queue:
// a run asks for a count and gets the first free ones in arrival order.
type Pool struct {
	Name    string
	Env     string // the vendor's variable that makes devices visible, e.g. ASCEND_RT_VISIBLE_DEVICES; "" for none
	Members []Member
	Where   string // file:line where it is declared
}

// Member is a device of a pool.
type Member struct {
	Name  string // as people and {devices} say it, e.g. npu3
	Index string // what the vendor's runtime calls it, e.g. 3
}

// Pools are a host's declared pools, by name.
type Pools struct {
	File   string
	byName map[string]*Pool
	member map[string]*Pool // pool of each device
}

var (
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })
	// envRE is what a vendor's device variable looks like; env= takes
	// nothing else, so a pools file cannot set PATH, LD_PRELOAD and the
	// like in every command run under a ticket.
	envRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Z][A-Z0-9_]*_(VISIBLE_DEVICES|DEVICES|AFFINITY_MASK)$`)
	})
)

// vendorEnv are the device variables of the runtimes known, whatever envRE
// says.
var vendorEnv = []string{
	"ASCEND_RT_VISIBLE_DEVICES", // Ascend CANN
	"ZE_AFFINITY_MASK",          // Level Zero (Intel)
	"CUDA_VISIBLE_DEVICES",
	"HIP_VISIBLE_DEVICES",
	"ROCR_VISIBLE_DEVICES",
}

// checkEnv says what is wrong with v as a pool's env=, or "".
func checkEnv(v string) string {
	switch {
	case slices.Contains(vendorEnv, v):
		return ""
	case v == "NPU_HOLD_DEVICES":
		return "env=NPU_HOLD_DEVICES: npu-hold sets it to the devices' names itself; name the vendor's variable, e.g. ASCEND_RT_VISIBLE_DEVICES"
	case strings.HasPrefix(v, "LD_") || !envRE().MatchString(v):
		return fmt.Sprintf("env=%s: not a device variable; name the vendor's variable that makes devices visible (%s, or a NAME_VISIBLE_DEVICES, NAME_DEVICES or NAME_AFFINITY_MASK)", clip(v, maxShown), strings.Join(vendorEnv, ", "))
	}
	return ""
}

// LoadPools reads the pools declared in path; a file that does not exist
// declares none. It is opened without blocking and must be a regular file:
// a FIFO or a device there is refused, never waited on.
func LoadPools(path string) (*Pools, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return &Pools{File: path}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the pools file %s cannot be read: %v", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		what := "its type cannot be read"
		if err == nil {
			what = fmt.Sprintf("a %v", fi.Mode().Type())
		}
		return nil, fmt.Errorf("the pools file %s is not a regular file (%s); make it a file of one pool a line (docs/runner.md)", path, what)
	}
	if err := checkPoolsOwner(path, f); err != nil {
		return nil, err
	}
	return ParsePools(path, f)
}

// ParsePools reads a pools file: one pool a line,
//
//	NAME [env=VARIABLE] DEVICE[=INDEX]...
//
// with # comments. A device's index is what the vendor's runtime calls it
// (its place in the line, from 0, when not given). Every problem is listed.
func ParsePools(file string, r interface{ Read([]byte) (int, error) }) (*Pools, error) {
	ps := &Pools{File: file, byName: map[string]*Pool{}, member: map[string]*Pool{}}
	var errs []string
	bad := func(where, format string, args ...any) {
		errs = append(errs, where+": "+fmt.Sprintf(format, args...))
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		where := fmt.Sprintf("%s:%d", file, n)
		p := &Pool{Name: fields[0], Where: where}
		if !nameRE().MatchString(p.Name) {
			bad(where, "pool name %q: use letters, digits, '.', '_' and '-'", p.Name)
		} else if err := CheckName(p.Name); err != nil {
			bad(where, "pool %v", strings.TrimPrefix(err.Error(), "device "))
		}
		if old, ok := ps.byName[p.Name]; ok {
			bad(where, "pool %s is declared twice (also at %s); keep one line for it", p.Name, old.Where)
		}
		indexes := map[string]string{}
		given := 0
		for _, w := range fields[1:] {
			if v, ok := strings.CutPrefix(w, "env="); ok {
				if msg := checkEnv(v); msg != "" {
					bad(where, "%s", msg)
				}
				p.Env = v
				continue
			}
			given++
			name, idx, hasIdx := strings.Cut(w, "=")
			if !hasIdx {
				idx = strconv.Itoa(len(p.Members))
			}
			if !nameRE().MatchString(name) || idx == "" || strings.ContainsAny(idx, ",") {
				bad(where, "device %q: write NAME or NAME=INDEX (letters, digits, '.', '_' and '-'; the index without commas)", w)
				continue
			}
			if err := CheckName(name); err != nil {
				bad(where, "%v", err)
				continue
			}
			if slices.ContainsFunc(p.Members, func(m Member) bool { return m.Name == name }) {
				bad(where, "device %s is named twice in pool %s: name each device once", name, p.Name)
				continue
			}
			if other, ok := ps.member[name]; ok {
				bad(where, "device %s is named twice (also in pool %s at %s): a device belongs to one pool, once", name, other.Name, other.Where)
				continue
			}
			if prev, ok := indexes[idx]; ok {
				bad(where, "devices %s and %s have the same index %s: give each its own", prev, name, idx)
				continue
			}
			indexes[idx] = name
			p.Members = append(p.Members, Member{Name: name, Index: idx})
			ps.member[name] = p
		}
		if given == 0 {
			bad(where, "pool %s has no devices: list them after its name, e.g. '%s %s0 %s1'", p.Name, p.Name, p.Name, p.Name)
		}
		ps.byName[p.Name] = p
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("the pools file %s cannot be read: %v", file, err)
	}
	for name, p := range ps.byName {
		if q, ok := ps.member[name]; ok {
			bad(p.Where, "%s is both a pool and a device of pool %s (%s): name them apart", name, q.Name, q.Where)
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return ps, nil
}

// Names are the declared pools' names, sorted.
func (ps *Pools) Names() []string {
	var out []string
	for n := range ps.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Pool is the pool named name, or nil.
func (ps *Pools) Pool(name string) *Pool { return ps.byName[name] }

// Resolve is the pool a run asks count devices of, by name: nil when name is
// one device that is not in a pool. The count and the name are checked
// against what the host declares.
func (ps *Pools) Resolve(name string, count int, countFlag string) (*Pool, error) {
	if count < 1 {
		return nil, fmt.Errorf("%s %d: ask for 1 device or more", countFlag, count)
	}
	if p := ps.byName[name]; p != nil {
		if count > len(p.Members) {
			return nil, fmt.Errorf("%s %d: pool %s has %d devices (%s); ask for at most %d, or declare more there", countFlag, count, name, len(p.Members), p.Where, len(p.Members))
		}
		return p, nil
	}
	if p := ps.member[name]; p != nil {
		return nil, fmt.Errorf("device %s belongs to pool %s (%s), whose queue hands it out: ask for the pool (--device %s, with a count)", name, p.Name, p.Where, p.Name)
	}
	if count > 1 {
		return nil, fmt.Errorf("%s %d: %s is one device, not a pool declared in %s; declare it there, e.g. '%s %s0 %s1' (docs/runner.md)", countFlag, count, name, ps.File, name, name, name)
	}
	return nil, nil
}

// sortIndexes orders indexes as numbers where they are (Ascend's runtime
// reads only an ascending list).
func sortIndexes(idx []string) []string {
	out := slices.Clone(idx)
	slices.SortStableFunc(out, func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA == nil && errB == nil {
			return x - y
		}
		return 0
	})
	return out
}
