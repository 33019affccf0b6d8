package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
)

// other is a user who is not this one: the serve's user in the checks, for
// whom this user's files are another's.
const other = 4242

// TestSensorWritableBy: a counter: or power: file the serve's user owns, or
// that others may write, or that lies in a directory the serve's user (or
// anyone) may write without the sticky bit, is a sensor the serve could
// set; one only another user (a sensor daemon's) or root can write is not.
func TestSensorWritableBy(t *testing.T) {
	base := t.TempDir()
	me := uint32(os.Geteuid())
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(base, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	file := mk("d/uj", 0o644)
	// This user's file: the serve, as this user, could write it.
	if why := SensorWritableBy(file, me); me != 0 && (!strings.Contains(why, file+" belongs to") || !strings.HasSuffix(why, ", the serve's user")) {
		t.Errorf("this user's own file: %q", why)
	}
	// Another user's view: this user's files and directories are not
	// theirs, and no one else may write them.
	if why := SensorWritableBy(file, other); why != "" {
		t.Errorf("a file another user owns, mode 0644, in directories only they write: %q", why)
	}
	for _, c := range []struct {
		path string
		want string
	}{
		{mk("g/uj", 0o664), "/g/uj may be written by others than its owner (mode 0664)"},
		{mk("o/uj", 0o646), "/o/uj may be written by others than its owner (mode 0646)"},
	} {
		if why := SensorWritableBy(c.path, other); !strings.HasSuffix(why, c.want) {
			t.Errorf("%s: %q, want %q", c.path, why, c.want)
		}
	}
	open := mk("open/uj", 0o644)
	os.Chmod(filepath.Dir(open), 0o777)
	if why := SensorWritableBy(open, other); !strings.Contains(why, "/open may be written by others (mode 0777) without the sticky bit: the file in it could be replaced") {
		t.Errorf("in a directory anyone may write: %q", why)
	}
	sticky := mk("sticky/uj", 0o644)
	os.Chmod(filepath.Dir(sticky), os.ModeSticky|0o777)
	if why := SensorWritableBy(sticky, other); why != "" {
		t.Errorf("in a sticky directory, the file another's: %q", why)
	}
	// A symlink is judged as given and as it leads.
	link := filepath.Join(base, "open", "link")
	os.Symlink(file, link)
	if why := SensorWritableBy(link, other); !strings.Contains(why, "/open may be written by others") {
		t.Errorf("a symlink in an open directory: %q", why)
	}
	link2 := filepath.Join(base, "d", "link")
	os.Symlink(open, link2)
	if why := SensorWritableBy(link2, other); !strings.Contains(why, "/open may be written by others") {
		t.Errorf("a symlink leading into an open directory: %q", why)
	}
	if why := SensorWritableBy(filepath.Join(base, "none"), other); !strings.Contains(why, "no such file") {
		t.Errorf("no file: %q", why)
	}
	// Root, the serve's user: any file but a kernel's.
	if why := SensorWritableBy(file, 0); why != "the serve runs as root, as the gate does, and root can write any file but those the kernel serves (sysfs)" {
		t.Errorf("as root: %q", why)
	}
	const kernels = "/sys/devices/system/cpu/online"
	if fi, err := os.Stat(kernels); err == nil && fi.Mode().Perm()&0o222 == 0 {
		if why := SensorWritableBy(kernels, 0); why != "" {
			t.Errorf("a read-only sysfs file, as root: %q", why)
		}
		if why := SensorWritableBy(kernels, me); why != "" {
			t.Errorf("a read-only sysfs file: %q", why)
		}
	}
}

// A sensor file that another user owns, in a directory of theirs, as the
// serve's user (uid 65534) sees it: a file chowned to 65534, or its
// directory, is the serve's to set. Needs root to give files away.
func TestRootSensorWritableByChowned(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("plays other users (files made with chown): needs root, and uid %d is not; run as root: go test -run '^TestRoot' ./internal/config", uid)
	}
	const serve, daemon = 65534, 4243
	base := t.TempDir()
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "sensor")
	os.Mkdir(dir, 0o755)
	file := filepath.Join(dir, "uj")
	os.WriteFile(file, []byte("1\n"), 0o644)
	os.Chown(dir, daemon, daemon)
	os.Chown(file, daemon, daemon)
	if why := SensorWritableBy(file, serve); why != "" {
		t.Errorf("a sensor daemon's file in its directory: %q", why)
	}
	os.Chown(file, serve, serve)
	if why := SensorWritableBy(file, serve); !strings.Contains(why, file+" belongs to") || !strings.Contains(why, "uid 65534") {
		t.Errorf("the serve's user's file: %q", why)
	}
	os.Chown(file, daemon, daemon)
	os.Chown(dir, serve, serve)
	if why := SensorWritableBy(file, serve); !strings.Contains(why, dir+" belongs to") || !strings.Contains(why, "the file in it could be replaced") {
		t.Errorf("in the serve's user's directory: %q", why)
	}
}

// TestCheckEnergyCeiling: a ceiling on a sensor file the serve could set,
// or one whose shortest window the replies allowed cannot reach, is bad
// input, said before anything starts; without a ceiling both are fine.
func TestCheckEnergyCeiling(t *testing.T) {
	file := filepath.Join(t.TempDir(), "uj")
	os.WriteFile(file, []byte("1\n"), 0o644)
	check := func(mod func(c *Config)) string {
		c := Default()
		c.Energy, c.EnergyIdle, c.MaxJoulesPerToken = "counter:"+file, time.Second, 1
		mod(&c)
		p := &Plan{EnergyEnv: energy.Env{Sys: t.TempDir()}}
		var msgs []string
		for _, err := range c.checkEnergy(p) {
			msgs = append(msgs, err.Error())
		}
		return strings.Join(msgs, "\n")
	}
	got := check(func(c *Config) {})
	if !strings.Contains(got, "--max-joules-per-token 1 judges what --energy counter:"+file+" reads, and the serve could set it: ") ||
		!strings.Contains(got, "give the ceiling a sensor the serve's user cannot write: the kernel's (sysfs), or, where the runner is not root, a file only root or a sensor daemon's user can write") {
		t.Errorf("a file the serve could set: %q", got)
	}
	if got := check(func(c *Config) { c.MaxJoulesPerToken = 0 }); got != "" {
		t.Errorf("no ceiling: %q", got)
	}
	// No idle reading is fine: the ceiling judges gross joules.
	if got := check(func(c *Config) { c.EnergyIdle = 0 }); strings.Contains(got, "energy-idle") {
		t.Errorf("no idle reading: %q", got)
	}
	// The longest window the replies allowed can make: 15 replies of 128
	// tokens at the floor of 60 tok/s and the first token's 600 ms is 41
	// s; a counter needs 3.3 s, so 2 replies of 4 tokens (1.33 s) cannot.
	got = check(func(c *Config) { c.MaxReplies, c.MaxTokens = 2, 4 })
	if want := "--max-joules-per-token 1 cannot be judged with the replies allowed: --max-replies 2 of --max-tokens 4 at the --floor of 60 tok/s, each with --first-token-ms 600, last 1.333 s at most, and counter:" + file + " needs a window of 3.3 s (33 periods of at least 100 ms: docs/measuring.md, energy per token); allow more replies or tokens"; !strings.Contains(got, want) {
		t.Errorf("a window too short:\n%s\nwant\n%s", got, want)
	}
	// At the edge: 3.3 s exactly is enough.
	if got := check(func(c *Config) { c.MaxReplies, c.MaxTokens, c.FirstTokenMS, c.Floor = 3, 66, 100, 66 }); strings.Contains(got, "cannot be judged with the replies allowed") {
		t.Errorf("3 replies of 66 tokens at 66 tok/s, 100 ms first tokens (3.3 s): %q", got)
	}
	if got := check(func(c *Config) { c.MaxReplies, c.MaxTokens, c.FirstTokenMS, c.Floor = 3, 66, 99, 66 }); !strings.Contains(got, "last 3.297 s at most") {
		t.Errorf("3.297 s: %q", got)
	}
	// A floor from the baseline is not known yet: not said up front.
	if got := check(func(c *Config) { c.MaxReplies, c.MaxTokens, c.FloorFromBaseline = 2, 4, 0.8 }); strings.Contains(got, "cannot be judged with the replies allowed") {
		t.Errorf("a floor from the baseline: %q", got)
	}
}

// A symlink to a kernel's file is judged where it lies, as a path through
// it: the serve could point one in a directory it may write (or, as root,
// any one outside sysfs) at a file of its own, which a read-only sysfs
// file at its end does not stop.
func TestSensorWritableBySymlinkToKernel(t *testing.T) {
	const kernels = "/sys/devices/system/cpu/online"
	if fi, err := os.Stat(kernels); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Skipf("no read-only sysfs file at %s here", kernels)
	}
	base := t.TempDir()
	link := filepath.Join(base, "online")
	if err := os.Symlink(kernels, link); err != nil {
		t.Fatal(err)
	}
	me := uint32(os.Geteuid())
	if why := SensorWritableBy(link, me); me != 0 && !strings.Contains(why, link+" belongs to") {
		t.Errorf("SensorWritableBy(%s -> %s, this user) = %q, want the symlink named as this user's", link, kernels, why)
	}
	if why := SensorWritableBy(link, 0); !strings.Contains(why, link+" is a symlink outside sysfs") {
		t.Errorf("SensorWritableBy(%s -> %s, root) = %q, want the symlink named", link, kernels, why)
	}
	// The kernel's own symlinks (sysfs's bus and class links) are no
	// way in.
	const through = "/sys/bus/cpu/devices/cpu0/topology/core_id"
	if fi, err := os.Stat(through); err == nil && fi.Mode().Perm()&0o222 == 0 {
		for _, uid := range []uint32{0, me, other} {
			if why := SensorWritableBy(through, uid); why != "" {
				t.Errorf("SensorWritableBy(%s, uid %d) = %q, want \"\"", through, uid, why)
			}
		}
	}
}

// A ceiling's sensor that cannot be read (not there, not a regular file,
// no number in it) is said as such, once: not also as one the serve could
// set ("lstat ...: no such file or directory" read as how it could).
func TestCheckEnergyCeilingUnreadable(t *testing.T) {
	dir := t.TempDir()
	words := filepath.Join(dir, "words")
	os.WriteFile(words, []byte("forty\n"), 0o644)
	none := filepath.Join(dir, "none")
	for _, c := range []struct {
		energy, want string
	}{
		{"counter:" + none, "--energy counter:" + none + " has none: counter:" + none + ": " + none + ": no such file or directory"},
		{"power:/dev/zero", "--energy power:/dev/zero has none: power:/dev/zero: /dev/zero is not a regular file"},
		{"counter:" + words, "--energy counter:" + words + " has none: counter:" + words + ": " + words + " does not hold a non-negative number: \"forty\""},
	} {
		cfg := Default()
		cfg.Energy, cfg.MaxJoulesPerToken = c.energy, 1
		var msgs []string
		for _, err := range cfg.checkEnergy(&Plan{EnergyEnv: energy.Env{Sys: t.TempDir()}}) {
			msgs = append(msgs, err.Error())
		}
		got := strings.Join(msgs, "\n")
		if !strings.Contains(got, "--max-joules-per-token 1 needs an energy source this runner can read, and "+c.want) {
			t.Errorf("checkEnergy(--energy %s) = %q, want %q", c.energy, got, c.want)
		}
		if strings.Contains(got, "the serve could set it") {
			t.Errorf("checkEnergy(--energy %s) = %q: a file that cannot be read is said as one the serve could set", c.energy, got)
		}
	}
}

// The program an nvml or npu-smi source runs is a sensor too: one the
// serve's user could replace (its own, in a directory it may write) is
// bad input with a ceiling. Plays the serve's user as this one, which must
// not be root (as root the tool is not checked).
func TestCheckEnergyCeilingTool(t *testing.T) {
	if uid := os.Geteuid(); uid == 0 {
		t.Skipf("the serve's user is this one, and as root the tool is not checked: run as another user (uid %d is root)", uid)
	}
	dir := t.TempDir()
	tool := filepath.Join(dir, "nvidia-smi")
	script := "#!/bin/sh\ncase \" $* \" in *\" -lms \"*) while :; do echo 250.5; sleep 0.05; done;; esac\necho 250.5\n"
	if err := os.WriteFile(tool, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	cfg := Default()
	cfg.Energy, cfg.MaxJoulesPerToken = "nvml", 1
	var msgs []string
	for _, err := range cfg.checkEnergy(&Plan{}) {
		msgs = append(msgs, err.Error())
	}
	got := strings.Join(msgs, "\n")
	if want := "--max-joules-per-token 1 judges what --energy nvml reads through " + tool + ", and the serve could replace it: " + tool + " belongs to"; !strings.Contains(got, want) {
		t.Errorf("checkEnergy(--energy nvml, nvidia-smi the serve's user's) = %q, want %q", got, want)
	}
}

// With a ceiling, the sensor's readings refuse a file the serve's user
// owns from then on (Env.ServeUID): this user, unless root (who owns
// sysfs's files too); without one, they read it and the figures say so.
func TestCheckEnergyServeUID(t *testing.T) {
	me := uint32(os.Geteuid())
	for _, ceiling := range []float64{0, 1} {
		cfg := Default()
		cfg.Energy, cfg.MaxJoulesPerToken = "off", ceiling
		if ceiling > 0 {
			cfg.Energy = "auto"
		}
		p := &Plan{EnergyEnv: energy.Env{Sys: t.TempDir()}}
		cfg.checkEnergy(p)
		want := uint32(0)
		if ceiling > 0 {
			want = me
		}
		if p.EnergyEnv.ServeUID != want {
			t.Errorf("checkEnergy(--max-joules-per-token %g) ServeUID = %d, want %d", ceiling, p.EnergyEnv.ServeUID, want)
		}
	}
}
