package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

// DefaultEnergyIdle is how long the serve's idle power is read before the
// first judged request and after the last, at least: a window of ten
// periods of a sensor that updates every 100 ms.
const DefaultEnergyIdle = time.Second

// MaxEnergyIdle bounds --energy-idle: each run pays it twice.
const MaxEnergyIdle = time.Minute

// checkEnergy checks --energy, --energy-idle and --max-joules-per-token. A
// ceiling needs a source this runner can read now, that the serve cannot
// set, and whose shortest window (judge.CeilingWindow) the replies allowed
// can reach: each is bad input, found before anything starts.
func (c *Config) checkEnergy(p *Plan) []error {
	var errs []error
	spec, err := energy.ParseSpec(c.Energy)
	if err != nil {
		errs = append(errs, fmt.Errorf("--energy: %v", err))
	}
	if c.EnergyIdle < 0 || c.EnergyIdle > MaxEnergyIdle {
		errs = append(errs, fmt.Errorf("--energy-idle %v: pass a duration from 0 (no idle reading, no net figure) to %v, e.g. 1s", c.EnergyIdle, MaxEnergyIdle))
	}
	p.EnergySpec, p.EnergyOrder = spec, Presets[c.Preset].Energy
	if p.EnergyEnv.Sys == "" {
		p.EnergyEnv = energy.DefaultEnv(p.Tools)
	}
	if err != nil || !(c.MaxJoulesPerToken > 0) {
		return errs
	}
	// Once checked, the run's readings refuse a file the serve's user owns
	// (one it made in the sensor's place); the check reads it as it is.
	defer func() { p.EnergyEnv.ServeUID = uint32(os.Geteuid()) }()
	if spec.Kind == energy.Off {
		return append(errs, fmt.Errorf("--max-joules-per-token %g needs an energy source, and --energy is off; pass --energy auto or a source", c.MaxJoulesPerToken))
	}
	src, _, err := energy.Open(spec, p.EnergyOrder, p.EnergyEnv)
	if err != nil {
		what := "--energy " + c.Energy
		if errors.Is(err, energy.ErrUnavailable) {
			return append(errs, fmt.Errorf("--max-joules-per-token %g needs an energy source this runner can read, and %s has none: %v (npu-hold doctor lists the sources; docs/measuring.md: energy)", c.MaxJoulesPerToken, what, err))
		}
		return append(errs, fmt.Errorf("%s: %v", what, err))
	}
	info := src.Info()
	src.Close()
	// A file read, or a program run: who else could write it.
	if tool, why := SourceWritableBy(spec, info, p.EnergyEnv, uint32(os.Geteuid())); why != "" && tool == "" {
		errs = append(errs, fmt.Errorf("--max-joules-per-token %g judges what --energy %s reads, and the serve could set it: %s; give the ceiling a sensor the serve's user cannot write: the kernel's (sysfs), or, where the runner is not root, a file only root or a sensor daemon's user can write, in directories only they can (docs/measuring.md: energy per token)", c.MaxJoulesPerToken, c.Energy, why))
	} else if why != "" {
		errs = append(errs, fmt.Errorf("--max-joules-per-token %g judges what --energy %s reads through %s, and the serve could replace it: %s; install %s where only root can write it (its package's place, e.g. /usr/bin), first on PATH (docs/measuring.md: energy per token)", c.MaxJoulesPerToken, c.Energy, tool, why, filepath.Base(tool)))
	}
	// The longest window a run that passes the rate row asks: every reply
	// at the most tokens, decoding at the floor after the first-token
	// limit. A floor from the baseline is known only once it is read.
	if c.FloorFromBaseline == 0 {
		period := info.Period
		if period == 0 {
			period = info.Poll
		}
		periodMS, lagMS := float64(period)/float64(time.Millisecond), float64(info.Lag)/float64(time.Millisecond)
		replies := max(c.Replies, c.MaxReplies)
		most := float64(replies) * (c.FirstTokenMS/1000 + float64(c.MaxTokens)/c.Floor)
		if need := judge.CeilingWindow(info.Quantity, periodMS, lagMS); most < need {
			errs = append(errs, fmt.Errorf("--max-joules-per-token %g cannot be judged with the replies allowed: --max-replies %d of --max-tokens %d at the --floor of %g tok/s, each with --first-token-ms %g, last %.4g s at most, and %s needs a window of %.4g s (%d periods of at least %g ms: docs/measuring.md, energy per token); allow more replies or tokens",
				c.MaxJoulesPerToken, replies, c.MaxTokens, c.Floor, c.FirstTokenMS, most, info.Name, need, judge.CeilingPeriods(info.Quantity, periodMS, lagMS), max(periodMS, judge.MinBoundPeriodMS)))
		}
	}
	return errs
}

// SourceWritableBy says how a process of uid, the serve's user, could set
// what the source read reads, or "": for a counter: or power: file,
// SensorWritableBy of it; for nvml or npu-smi, of the program the source
// runs (tool, its path as env found it), where uid is not root (root could
// replace any program, and is not asked about it).
func SourceWritableBy(spec energy.Spec, info energy.Info, env energy.Env, uid uint32) (tool, why string) {
	if spec.Kind == "counter" || spec.Kind == "power" {
		return "", SensorWritableBy(spec.Arg, uid)
	}
	name := energy.ToolOf(info)
	if name == "" || uid == 0 {
		return "", ""
	}
	t, err := env.Tools.Look(name)
	if err != nil {
		return "", ""
	}
	if why := SensorWritableBy(t.Path, uid); why != "" {
		return t.Path, why
	}
	return "", ""
}

// sysfsMagic is sysfs's filesystem type (statfs's f_type): its files are
// the kernel's.
const sysfsMagic = 0x62656572

// SensorWritableBy says how a process of uid, the serve's user, could set
// what the sensor file at path reads, or "" when it could not: the file,
// and every directory from it up to /, along the path as given and the one
// it leads to, must belong to another user (root, or a sensor daemon's),
// the file be writable by its owner alone, and the directories by their
// owners alone or carry the sticky bit (no one may then replace another's
// file in them): the rule CheckPrivateDir applies to --out, turned round.
// Root can write any file, so to a serve that runs as root only a file the
// kernel serves (sysfs), writable by no one, is out of reach.
func SensorWritableBy(path string, uid uint32) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err.Error()
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err.Error()
	}
	fi, err := os.Stat(real)
	kernels := err == nil && fi.Mode().Perm()&0o222 == 0 && onSysfs(real)
	if uid == 0 {
		if !kernels {
			return "the serve runs as root, as the gate does, and root can write any file but those the kernel serves (sysfs)"
		}
		// Root could point a symlink outside sysfs at a file of its own.
		for p := abs; p != filepath.Dir(p); p = filepath.Dir(p) {
			if fi, err := os.Lstat(p); err != nil {
				return err.Error()
			} else if fi.Mode()&os.ModeSymlink != 0 && !onSysfs(filepath.Dir(p)) {
				return fmt.Sprintf("%s is a symlink outside sysfs, and the serve runs as root, as the gate does, which could replace it; name the kernel's file (%s)", p, real)
			}
		}
		return ""
	}
	paths := []string{abs}
	if real != abs && !kernels {
		paths = append(paths, real)
	}
	for _, path := range paths {
		for p := path; ; p = filepath.Dir(p) {
			// No one replaces what lies in sysfs, the kernel's.
			if kernels && p != filepath.Dir(p) && onSysfs(filepath.Dir(p)) {
				continue
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err.Error()
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return p + ": cannot tell its owner"
			}
			perm := fi.Mode().Perm()
			if st.Uid == uid {
				if p == path {
					return fmt.Sprintf("%s belongs to %s, the serve's user", p, owner(uid))
				}
				return fmt.Sprintf("%s belongs to %s, the serve's user: the file in it could be replaced", p, owner(uid))
			}
			if fi.Mode().IsRegular() && perm&0o022 != 0 {
				return fmt.Sprintf("%s may be written by others than its owner (mode %04o)", p, perm)
			}
			if fi.IsDir() && perm&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
				return fmt.Sprintf("%s may be written by others (mode %04o) without the sticky bit: the file in it could be replaced", p, perm)
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return ""
}

// onSysfs reports whether path, followed, lies in sysfs.
func onSysfs(path string) bool {
	var fs syscall.Statfs_t
	return syscall.Statfs(path, &fs) == nil && fs.Type == sysfsMagic
}
