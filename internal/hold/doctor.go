package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Check is one finding of the doctor.
type Check struct {
	Level string // "ok", "warn" or "FAIL"
	What  string
}

// Doctor looks at what a serve on the device needs: the device nodes open,
// the driver and firmware as sysfs shows them, the memlock limit, and the
// lock directory. Root is the filesystem root ("/"; tests use a tree of
// their own). Memlock is the RLIMIT_MEMLOCK soft limit in bytes.
func Doctor(root, lockDir string, memlock uint64) []Check {
	var cs []Check
	add := func(level, format string, args ...any) {
		cs = append(cs, Check{level, fmt.Sprintf(format, args...)})
	}
	nodes, _ := filepath.Glob(filepath.Join(root, "dev/accel/accel*"))
	if len(nodes) == 0 {
		add("FAIL", "no device node /dev/accel/accel*: load the NPU driver (modprobe amdxdna, or intel_vpu) and check the NPU is enabled in the firmware setup")
	}
	for _, node := range nodes {
		name := filepath.Base(node)
		shown := "/dev/accel/" + name
		f, err := os.OpenFile(node, os.O_RDWR, 0)
		if err != nil {
			fix := "check the driver's messages (dmesg)"
			if errors.Is(err, os.ErrPermission) {
				fix = "add the runner's user to the device's group (usually render: usermod -aG render USER), then log in again"
			}
			add("FAIL", "%s does not open (%v): %s", shown, unwrap(err), fix)
			continue
		}
		f.Close()
		sys := filepath.Join(root, "sys/class/accel", name, "device")
		driver := "unknown driver"
		if target, err := os.Readlink(filepath.Join(sys, "driver")); err == nil {
			driver = filepath.Base(target)
			if v := readTrim(filepath.Join(root, "sys/module", driver, "version")); v != "" {
				driver += " " + v
			}
		}
		details := []string{driver}
		if v := readTrim(filepath.Join(sys, "vbnv")); v != "" {
			details = append(details, v)
		}
		if v := readTrim(filepath.Join(sys, "fw_version")); v != "" {
			details = append(details, "firmware "+v)
		} else {
			details = append(details, "firmware version not in sysfs (dmesg shows it at load)")
		}
		add("ok", "%s opens (%s)", shown, strings.Join(details, ", "))
	}

	if memlock == unix.RLIM_INFINITY {
		add("ok", "memlock limit: unlimited")
	} else {
		add("warn", "memlock limit: %d KiB; NPU runtimes pin buffers and want it unlimited: LimitMEMLOCK=infinity in the runner's systemd unit, or '* - memlock unlimited' in /etc/security/limits.d/", memlock/1024)
	}

	fi, err := os.Stat(lockDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		add("FAIL", "lock directory %s does not exist: create it for every boot with the systemd-tmpfiles line 'd %s 1777 root root -' (README: set up the runner)", lockDir, lockDir)
	case err != nil:
		add("FAIL", "lock directory %s: %v", lockDir, err)
	case !fi.IsDir():
		add("FAIL", "lock directory %s is not a directory", lockDir)
	case fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0:
		add("FAIL", "lock directory %s is mode %v, want drwxrwxrwt (1777) so every user and runner can queue: chmod 1777 %s", lockDir, fi.Mode(), lockDir)
	default:
		add("ok", "lock directory %s is shared (1777)", lockDir)
	}
	return cs
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
