//go:build unix

package hold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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
	ascend := ascendChecks(root)
	rockchip := rockchipChecks(root)
	if len(nodes) == 0 && len(ascend) == 0 && len(rockchip) == 0 {
		add("FAIL", "no device node /dev/accel/accel*: load the NPU driver (modprobe amdxdna, or intel_vpu) and check the NPU is enabled in the firmware setup")
		for _, mod := range []string{"amdxdna", "intel_vpu"} {
			if isDir(filepath.Join(root, "sys/module", mod)) {
				add("FAIL", "the %s module is loaded but made no /dev/accel node: its firmware did not load (dmesg | grep %s; the firmware files under /lib/firmware)", mod, mod)
			}
		}
	}
	for _, node := range nodes {
		name := filepath.Base(node)
		shown := "/dev/accel/" + name
		f, err := os.OpenFile(node, os.O_RDWR, 0)
		if err != nil {
			fix := "check the driver's messages (dmesg)"
			if errors.Is(err, os.ErrPermission) {
				fix = permFix(node, "add the runner's user to the device's group (usually render: usermod -aG render USER), then log in again")
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
		if strings.HasPrefix(driver, "amdxdna") {
			cs = append(cs, flmValidate()...)
		}
	}
	cs = append(cs, ascend...)
	cs = append(cs, rockchip...)

	if memlock == unix.RLIM_INFINITY {
		add("ok", "memlock limit: unlimited")
	} else {
		add("warn", "memlock limit: %d KiB; NPU runtimes pin buffers and want it unlimited: LimitMEMLOCK=infinity in the runner's systemd unit, or '* - memlock unlimited' in /etc/security/limits.d/", memlock/1024)
	}

	fi, err := os.Stat(lockDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		add("FAIL", "lock directory %s does not exist: create it for every boot with the systemd-tmpfiles line 'd %s 1777 root root -' (docs/runner.md)", lockDir, lockDir)
	case err != nil:
		add("FAIL", "lock directory %s: %v", lockDir, err)
	case !fi.IsDir():
		add("FAIL", "lock directory %s is not a directory", lockDir)
	case ownedByOther(fi) && outsideNS(fi.Sys().(*syscall.Stat_t).Uid, procText("/proc/self/uid_map"), procText("/proc/sys/kernel/overflowuid")):
		add("FAIL", "lock directory %s belongs to uid %d, which in this user namespace is how every user outside it shows (root or anyone), so it is refused; run the runner without a user namespace of its own (in Kubernetes, hostUsers left true), or run the gate with hold: none in a pod whose device the device plugin gives it alone (docs/runner.md)", lockDir, fi.Sys().(*syscall.Stat_t).Uid)
	case ownedByOther(fi):
		add("FAIL", "lock directory %s belongs to %s, so every other user refuses it; remove it and create it owned by root for every boot with the systemd-tmpfiles line 'd %s 1777 root root -' (docs/runner.md)", lockDir, owner(fi.Sys().(*syscall.Stat_t).Uid), lockDir)
	case fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0:
		add("FAIL", "lock directory %s is mode %v, want drwxrwxrwt (1777) so every user and runner can queue: chmod 1777 %s", lockDir, fi.Mode(), lockDir)
	default:
		add("ok", "lock directory %s is shared (1777)", lockDir)
	}
	return cs
}

// ownedByOther tells whether a lock directory belongs to a user other than
// root and this one.
func ownedByOther(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid != 0 && int(st.Uid) != os.Geteuid()
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
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

// ascendChecks look at a Huawei Ascend NPU: its device nodes (/dev/davinciN,
// and the driver's /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc, as
// vllm-ascend's installation guide passes them to a container), the driver
// version (/usr/local/Ascend/driver/version.info) and npu-smi info's health.
// None when the machine has no davinci node at all.
func ascendChecks(root string) []Check {
	nodes, _ := filepath.Glob(filepath.Join(root, "dev/davinci[0-9]*"))
	manager := filepath.Join(root, "dev/davinci_manager")
	if len(nodes) == 0 && !exists(manager) {
		return nil
	}
	var cs []Check
	add := func(level, format string, args ...any) {
		cs = append(cs, Check{level, fmt.Sprintf(format, args...)})
	}
	if len(nodes) == 0 {
		add("FAIL", "/dev/davinci_manager is there but no /dev/davinciN: the Ascend driver found no NPU (npu-smi info; check the card is seated and the driver matches the firmware)")
	}
	version := "driver version unknown (no /usr/local/Ascend/driver/version.info)"
	if v := versionInfo(filepath.Join(root, "usr/local/Ascend/driver/version.info")); v != "" {
		version = "driver " + v
	}
	for _, n := range nodes {
		cs = append(cs, accessCheck(n, "/dev/"+filepath.Base(n), version, "add the runner's user to the device's group (usually HwHiAiUser: usermod -aG HwHiAiUser USER), then log in again"))
	}
	for _, name := range []string{"davinci_manager", "devmm_svm", "hisi_hdc"} {
		if p := filepath.Join(root, "dev", name); !exists(p) {
			add("FAIL", "/dev/%s is missing: the Ascend driver is not fully loaded; reinstall the driver package (Ascend-hdk-*-npu-driver) and reboot", name)
		} else if err := unix.Access(p, unix.R_OK|unix.W_OK); err != nil {
			add("FAIL", "/dev/%s cannot be opened for reading and writing (%v): add the runner's user to its group (usually HwHiAiUser)", name, err)
		}
	}
	cs = append(cs, npuSMI()...)
	return cs
}

// versionInfo is the Version= line of Ascend's version.info.
func versionInfo(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Version="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

var npuSMIAlarm = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b(Alarm|Critical|Warning|Abnormal)\b`) })

// npuSMI runs `npu-smi info`, the check Ascend's guide gives that driver and
// firmware work, when it is on PATH.
func npuSMI() []Check {
	out, ran, err := run("npu-smi", "info")
	if !ran {
		return []Check{{"warn", "npu-smi is not on PATH, so the NPUs' health is not checked: put the driver's tools on PATH (/usr/local/bin/npu-smi, or /usr/local/Ascend/driver/tools)"}}
	}
	if err != nil {
		return []Check{{"FAIL", fmt.Sprintf("npu-smi info failed (%v): %s; check the driver and firmware versions match (npu-smi info -t health -i N for a card)", err, lastLine(out))}}
	}
	for l := range strings.SplitSeq(string(out), "\n") {
		if npuSMIAlarm().MatchString(l) {
			return []Check{{"FAIL", fmt.Sprintf("npu-smi info reports an unhealthy NPU: %q; see npu-smi info -t health -i N for the card", strings.TrimSpace(l))}}
		}
	}
	return []Check{{"ok", "npu-smi info: every NPU healthy"}}
}

// flmStack is what `flm validate --json` says of the NPU stack (FastFlowLM,
// src/src/main.cpp, sanity_check_npu_stack).
type flmStack struct {
	Object         string `json:"object"`
	KernelOK       *bool  `json:"kernel_ok"`
	AMDDeviceFound *bool  `json:"amd_device_found"`
	AllFWOK        *bool  `json:"all_fw_ok"`
	EnoughCols     *bool  `json:"enough_cols"`
	MemlockOK      *bool  `json:"memlock_ok"`
	Ready          bool   `json:"ready"`
}

// flmValidate runs `flm validate --json` when FastFlowLM is installed: its
// own check of the AMD NPU stack (kernel, amdxdna, firmware, columns,
// memlock).
func flmValidate() []Check {
	out, ran, err := run("flm", "validate", "--json")
	if !ran {
		return nil
	}
	var st flmStack
	if jerr := json.Unmarshal(bytes.TrimSpace(out), &st); jerr != nil || st.Object != "npu_stack_validation" {
		return []Check{{"FAIL", fmt.Sprintf("flm validate --json did not say (%v): %s; run it by hand", err, lastLine(out))}}
	}
	if st.Ready {
		return []Check{{"ok", "flm validate: the NPU stack is ready for FastFlowLM"}}
	}
	var cs []Check
	fixes := []struct {
		ok  *bool
		fix string
	}{
		{st.KernelOK, "the kernel or its amdxdna driver is too old for FastFlowLM: it wants Linux 6.17 or newer (amdxdna DRM 0.6)"},
		{st.AMDDeviceFound, "no AMD NPU found: load amdxdna (modprobe amdxdna) and enable the NPU in the firmware setup"},
		{st.AllFWOK, "the NPU firmware is too old: update it (linux-firmware, amdnpu/*/npu.sbin) to 1.1 or newer"},
		{st.EnoughCols, "the NPU has fewer than 8 columns free: stop what else uses it, or use an XDNA2 NPU"},
		{st.MemlockOK, "the memlock limit is too low: LimitMEMLOCK=infinity in the runner's systemd unit"},
	}
	for _, f := range fixes {
		if f.ok != nil && !*f.ok {
			cs = append(cs, Check{"FAIL", "flm validate: " + f.fix})
		}
	}
	if len(cs) == 0 {
		cs = append(cs, Check{"FAIL", "flm validate: not ready, for no reason it names; run flm validate by hand"})
	}
	return cs
}

// rockchipChecks look at a Rockchip NPU: the rknpu driver registers a DRM
// device (DRIVER_NAME "rknpu", drivers/rknpu/include/rknpu_drv.h in
// Rockchip's kernel), so its node is the render node whose driver is rknpu;
// its version is in debugfs (rknpu/version), readable by root only, and in
// dmesg ("[drm] Initialized rknpu 0.9.8 ...").
func rockchipChecks(root string) []Check {
	drivers, _ := filepath.Glob(filepath.Join(root, "sys/class/drm/renderD*/device/driver"))
	var cs []Check
	for _, d := range drivers {
		target, err := os.Readlink(d)
		if err != nil || filepath.Base(target) != "rknpu" {
			continue
		}
		name := filepath.Base(filepath.Dir(filepath.Dir(d)))
		version := "rknpu, version in dmesg (grep 'Initialized rknpu')"
		if v := readTrim(filepath.Join(root, "sys/kernel/debug/rknpu/version")); v != "" {
			version = "rknpu " + strings.TrimPrefix(v, "RKNPU driver: ")
		}
		cs = append(cs, accessCheck(filepath.Join(root, "dev/dri", name), "/dev/dri/"+name, version, "add the runner's user to the render group (usermod -aG render USER), then log in again"))
	}
	if len(cs) == 0 && isDir(filepath.Join(root, "sys/module/rknpu")) {
		cs = append(cs, Check{"FAIL", "the rknpu driver is loaded but no render node is its: check the device tree enables the NPU (dmesg | grep -i rknpu)"})
	}
	return cs
}

// accessCheck says whether a device node can be opened for reading and
// writing, without opening it (opening some NPUs' nodes claims them).
func accessCheck(path, shown, details, fix string) Check {
	if !exists(path) {
		return Check{"FAIL", fmt.Sprintf("%s is missing though its driver is there: check the driver's messages (dmesg)", shown)}
	}
	if err := unix.Access(path, unix.R_OK|unix.W_OK); err != nil {
		what := "check the driver's messages (dmesg)"
		if errors.Is(err, unix.EACCES) {
			what = permFix(path, fix)
		}
		return Check{"FAIL", fmt.Sprintf("%s cannot be opened for reading and writing (%v): %s", shown, err, what)}
	}
	return Check{"ok", fmt.Sprintf("%s can be opened (%s)", shown, details)}
}

// permFix says why this user may not open the device node, and what lets
// it: where the node's group may read and write it, the group, and the
// command that adds the user to it; else fallback, with the node's mode.
func permFix(node, fallback string) string {
	var st unix.Stat_t
	if unix.Stat(node, &st) != nil {
		return fallback
	}
	// As ls shows it: crw-rw---- for a character device.
	mode := os.FileMode(st.Mode & 0o777).String()
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		mode = "c" + mode[1:]
	case unix.S_IFBLK:
		mode = "b" + mode[1:]
	}
	group := groupNamed(st.Gid)
	me := userName()
	if st.Mode&0o060 == 0o060 && !inGroup(st.Gid) {
		return fmt.Sprintf("it is %s, group %s, and %s (uid %d) is not in that group: sudo usermod -aG %s %s, then log in again (a runner service: restart it)", mode, group, me, os.Geteuid(), group, me)
	}
	return fmt.Sprintf("it is %s, owner %s, group %s: %s", mode, owner(st.Uid), group, fallback)
}

// groupNamed is a gid's name, or the number where it has none.
func groupNamed(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.Itoa(int(gid))); err == nil {
		return g.Name
	}
	return strconv.Itoa(int(gid))
}

// inGroup tells whether this process has gid among its groups.
func inGroup(gid uint32) bool {
	if uint32(os.Getegid()) == gid {
		return true
	}
	gs, _ := os.Getgroups()
	return slices.Contains(gs, int(gid))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// run runs a command found on PATH within CommandTimeout; ran is false when
// it is not on PATH.
func run(name string, args ...string) (out []byte, ran bool, err error) {
	exe, lerr := exec.LookPath(name)
	if lerr != nil {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.WaitDelay = time.Second
	out, err = cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer within %v", CommandTimeout)
	}
	return out, true, err
}

// lastLine is the last non-empty line of a command's output, for a report.
func lastLine(out []byte) string {
	lines := slices.DeleteFunc(strings.Split(string(out), "\n"), func(l string) bool { return strings.TrimSpace(l) == "" })
	if len(lines) == 0 {
		return "no output"
	}
	return fmt.Sprintf("%q", strings.TrimSpace(lines[len(lines)-1]))
}
