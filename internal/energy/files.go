package energy

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// fileSource reads a number from a file at each reading: a sysfs attribute
// or a file a runner's own sensor writes. The file is opened anew each time
// (a writer may replace it), without blocking (a FIFO is refused, never
// waited on), and must be a regular file.
type fileSource struct {
	info  Info
	path  string
	scale float64 // to joules or watts
	serve uint32  // a file this uid owns is refused (0: none)
}

func openFile(info Info, path string, scale float64, serve uint32) (Source, error) {
	return &fileSource{info: info, path: path, scale: scale, serve: serve}, nil
}

func (f *fileSource) Info() Info   { return f.info }
func (f *fileSource) Close() error { return nil }

func (f *fileSource) Read() (float64, error) {
	v, err := readNumberOf(f.path, f.serve)
	if err != nil {
		return 0, err
	}
	return bounded(f.info, v*f.scale)
}

// Bounds on what a sensor may say: a megawatt, and an exajoule of counter
// (a µJ counter of 2^64 is 1.8e13 J). Past them a reading is garbage, and
// the figures made of it would overflow.
const (
	maxWatts  = 1e6
	maxJoules = 1e18
)

func bounded(info Info, v float64) (float64, error) {
	limit, unit := maxJoules, "J"
	if info.Quantity == Power {
		limit, unit = maxWatts, "W"
	}
	if v > limit {
		return 0, fmt.Errorf("a reading of %.4g %s is past what a sensor can say (%.0g %s)", v, unit, limit, unit)
	}
	return v, nil
}

// maxFile bounds what is read of a sensor's file: a number and a newline.
const maxFile = 64

// readNumber reads one non-negative finite number from path.
func readNumber(path string) (float64, error) {
	return readNumberOf(path, 0)
}

// number is what a sensor's file of n bytes, read into buf (one more than
// maxFile), says: one non-negative finite number.
func number(path string, buf []byte, n int) (float64, error) {
	if n > maxFile {
		return 0, fmt.Errorf("%s holds more than a number (over %d bytes)", path, maxFile)
	}
	text := strings.TrimSpace(string(buf[:n]))
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%s does not hold a non-negative number: %q", path, clip(text, 40))
	}
	return v, nil
}

func readErr(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%s cannot be read by this user (%s): %w", path, whoAmI(), err)
	}
	return fmt.Errorf("%s: %v", path, err)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Accelerator drivers whose hwmon device `hwmon` (without a name) takes.
var hwmonDrivers = []string{"amdgpu", "xe", "i915", "habanalabs", "amdxdna", "intel_vpu"}

// openHwmon finds a hwmon device by its name file (name "" takes the first
// accelerator driver's) and reads, in order of preference, its energy1_input
// (µJ, a counter), power1_average (µW, a trailing average over
// power1_average_interval ms) or power1_input (µW).
// Documentation/hwmon/sysfs-interface.rst gives the units.
func openHwmon(sys, name string) (Source, error) {
	dirs, _ := filepath.Glob(filepath.Join(sys, "class", "hwmon", "hwmon*"))
	sort.Strings(dirs)
	var seen []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "name"))
		if err != nil {
			continue
		}
		n := strings.TrimSpace(string(b))
		seen = append(seen, n)
		if name != "" && n != name || name == "" && !contains(hwmonDrivers, n) {
			continue
		}
		label := func(f string) string {
			b, err := os.ReadFile(filepath.Join(d, f))
			if err != nil {
				return ""
			}
			return " (" + clip(strings.TrimSpace(string(b)), 40) + ")"
		}
		info := Info{Name: "hwmon:" + n, Method: NotKnown, Poll: DefaultPoll}
		if p := filepath.Join(d, "energy1_input"); exists(p) {
			info.Quantity, info.Boundary = Counter, "the "+n+" device"+label("energy1_label")
			return &fileSource{info: info, path: p, scale: 1e-6}, nil
		}
		if p := filepath.Join(d, "power1_average"); exists(p) {
			info.Quantity, info.Boundary = Power, "the "+n+" device"+label("power1_label")
			if ms, err := readNumber(filepath.Join(d, "power1_average_interval")); err == nil {
				info.Lag = time.Duration(ms * float64(time.Millisecond))
				info.Period = info.Lag
			}
			return &fileSource{info: info, path: p, scale: 1e-6}, nil
		}
		if p := filepath.Join(d, "power1_input"); exists(p) {
			info.Quantity, info.Boundary = Power, "the "+n+" device"+label("power1_label")
			return &fileSource{info: info, path: p, scale: 1e-6}, nil
		}
		return nil, notHere("hwmon %s (%s) has no energy1_input, power1_average or power1_input", n, d)
	}
	want := "an accelerator's (" + strings.Join(hwmonDrivers, ", ") + ")"
	if name != "" {
		want = fmt.Sprintf("one named %q", name)
	}
	if len(seen) == 0 {
		return nil, notHere("no hwmon device in %s", filepath.Join(sys, "class", "hwmon"))
	}
	return nil, notHere("no hwmon device is %s; there are: %s", want, strings.Join(seen, ", "))
}

// openRAPL reads a CPU package's RAPL counter through powercap
// (intel-rapl:N/energy_uj, µJ, wrapping at max_energy_range_uj). AMD's
// processors give theirs through the same interface. On an SoC the package
// holds the integrated GPU and NPU too. Since CVE-2020-8694 energy_uj is
// readable by root alone on most kernels.
func openRAPL(sys, dev string) (Source, error) {
	if dev == "" {
		dev = "0"
	}
	d := filepath.Join(sys, "class", "powercap", "intel-rapl:"+dev)
	if !exists(d) {
		return nil, notHere("no RAPL package %s (%s)", dev, d)
	}
	zone := "package-" + dev
	if b, err := os.ReadFile(filepath.Join(d, "name")); err == nil {
		zone = clip(strings.TrimSpace(string(b)), 40)
	}
	info := Info{Name: "rapl:" + dev, Quantity: Counter, Boundary: "CPU " + zone + " (RAPL; on an SoC its integrated GPU and NPU too)", Method: NotKnown, Poll: DefaultPoll}
	if r, err := readNumber(filepath.Join(d, "max_energy_range_uj")); err == nil {
		info.Range = r * 1e-6
	}
	p := filepath.Join(d, "energy_uj")
	if _, err := readNumber(p); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, notHere("%s is readable by root only (kernels since CVE-2020-8694); give the runner's user read access (docs/runner.md: energy sensors)", p)
		}
		return nil, notHere("%v", err)
	}
	return &fileSource{info: info, path: p, scale: 1e-6}, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
