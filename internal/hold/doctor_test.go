//go:build unix

// Unix only: the doctor's device nodes, sysfs and groups are Linux's; its
// Windows lines are tested in hold_windows_test.go.

package hold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// tree makes files (path: content) under a fresh root; a content starting
// with "-> " makes a symlink.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, text := range files {
		p := filepath.Join(root, path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if target, ok := strings.CutPrefix(text, "-> "); ok {
			os.Symlink(target, p)
			continue
		}
		os.WriteFile(p, []byte(text), 0o644)
	}
	return root
}

// fakeCommand puts an executable shell script called name on PATH.
func fakeCommand(t *testing.T, name, script string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// devices is the doctor's findings about devices: the memlock and lock
// directory lines left out.
func devices(root string) []Check {
	var out []Check
	for _, c := range Doctor(root, filepath.Join(root, "nolock"), unix.RLIM_INFINITY) {
		if !strings.HasPrefix(c.What, "memlock") && !strings.HasPrefix(c.What, "lock directory") {
			out = append(out, c)
		}
	}
	return out
}

var ascendTree = map[string]string{
	"dev/davinci0": "", "dev/davinci1": "", "dev/davinci_manager": "", "dev/devmm_svm": "", "dev/hisi_hdc": "",
	"usr/local/Ascend/driver/version.info": "Version=24.1.rc2\nascendhal_version=7.35.19\n",
}

func TestDoctorAscend(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := tree(t, ascendTree)
	want := []Check{
		{"ok", "/dev/davinci0 can be opened (driver 24.1.rc2)"},
		{"ok", "/dev/davinci1 can be opened (driver 24.1.rc2)"},
		{"warn", "npu-smi is not on PATH, so the NPUs' health is not checked: put the driver's tools on PATH (/usr/local/bin/npu-smi, or /usr/local/Ascend/driver/tools)"},
	}
	if diff := cmp.Diff(want, devices(root)); diff != "" {
		t.Errorf("Doctor() of an Ascend machine (-want +got):\n%s", diff)
	}

	fakeCommand(t, "npu-smi", `echo "| 0     910B3  | OK  | 93.5  45  0 / 0 |"`)
	if got := devices(root); got[len(got)-1] != (Check{"ok", "npu-smi info: every NPU healthy"}) {
		t.Errorf("Doctor() with a healthy npu-smi = %v", got)
	}
	fakeCommand(t, "npu-smi", `echo "| 0     910B3  | Alarm  | 93.5  45  0 / 0 |"`)
	if got := devices(root); got[len(got)-1] != (Check{"FAIL", `npu-smi info reports an unhealthy NPU: "| 0     910B3  | Alarm  | 93.5  45  0 / 0 |"; see npu-smi info -t health -i N for the card`}) {
		t.Errorf("Doctor() with an alarm = %v", got[len(got)-1])
	}
	fakeCommand(t, "npu-smi", `echo "dcmi module initialize failed. ret is -8005" >&2; exit 2`)
	if got := devices(root); got[len(got)-1] != (Check{"FAIL", `npu-smi info failed (exit status 2): "dcmi module initialize failed. ret is -8005"; check the driver and firmware versions match (npu-smi info -t health -i N for a card)`}) {
		t.Errorf("Doctor() with a failing npu-smi = %v", got[len(got)-1])
	}

	// A manager without NPUs, and the driver's other nodes missing.
	t.Setenv("PATH", t.TempDir())
	root = tree(t, map[string]string{"dev/davinci_manager": ""})
	want = []Check{
		{"FAIL", "/dev/davinci_manager is there but no /dev/davinciN: the Ascend driver found no NPU (npu-smi info; check the card is seated and the driver matches the firmware)"},
		{"FAIL", "/dev/devmm_svm is missing: the Ascend driver is not fully loaded; reinstall the driver package (Ascend-hdk-*-npu-driver) and reboot"},
		{"FAIL", "/dev/hisi_hdc is missing: the Ascend driver is not fully loaded; reinstall the driver package (Ascend-hdk-*-npu-driver) and reboot"},
		{"warn", "npu-smi is not on PATH, so the NPUs' health is not checked: put the driver's tools on PATH (/usr/local/bin/npu-smi, or /usr/local/Ascend/driver/tools)"},
	}
	if diff := cmp.Diff(want, devices(root)); diff != "" {
		t.Errorf("Doctor() of a broken Ascend driver (-want +got):\n%s", diff)
	}
	if os.Geteuid() != 0 {
		root = tree(t, ascendTree)
		os.Chmod(filepath.Join(root, "dev/davinci1"), 0o000)
		if got := devices(root); got[1].Level != "FAIL" || !strings.Contains(got[1].What, "usermod -aG HwHiAiUser USER") {
			t.Errorf("Doctor() of a node the user cannot open = %v", got[1])
		}
	}
}

var xdnaTree = map[string]string{
	"dev/accel/accel0": "", "sys/module/amdxdna/version": "2.19.0\n", "sys/bus/pci/drivers/amdxdna/.keep": "",
	"sys/class/accel/accel0/device/driver": "-> ../../../../bus/pci/drivers/amdxdna",
}

func TestDoctorXDNA(t *testing.T) {
	root := tree(t, xdnaTree)
	t.Setenv("PATH", t.TempDir())
	if got := devices(root); len(got) != 1 || got[0].Level != "ok" {
		t.Errorf("Doctor() without flm = %v, want the node alone", got)
	}
	fakeCommand(t, "flm", `[ "$1 $2" = "validate --json" ] || exit 9; echo '{"object":"npu_stack_validation","kernel_ok":true,"amd_device_found":true,"all_fw_ok":true,"enough_cols":true,"memlock_ok":true,"ready":true}'`)
	if got := devices(root); got[1] != (Check{"ok", "flm validate: the NPU stack is ready for FastFlowLM"}) {
		t.Errorf("Doctor() with a ready stack = %v", got)
	}
	fakeCommand(t, "flm", `echo '{"object":"npu_stack_validation","kernel_ok":false,"amd_device_found":true,"all_fw_ok":false,"enough_cols":true,"memlock_ok":false,"ready":false}'; exit 1`)
	want := []Check{
		{"FAIL", "flm validate: the kernel or its amdxdna driver is too old for FastFlowLM: it wants Linux 6.17 or newer (amdxdna DRM 0.6)"},
		{"FAIL", "flm validate: the NPU firmware is too old: update it (linux-firmware, amdnpu/*/npu.sbin) to 1.1 or newer"},
		{"FAIL", "flm validate: the memlock limit is too low: LimitMEMLOCK=infinity in the runner's systemd unit"},
	}
	if diff := cmp.Diff(want, devices(root)[1:]); diff != "" {
		t.Errorf("Doctor() with an unready stack (-want +got):\n%s", diff)
	}
	fakeCommand(t, "flm", `echo '{"object":"npu_stack_validation","ready":false}'; exit 1`)
	if got := devices(root); got[1] != (Check{"FAIL", "flm validate: not ready, for no reason it names; run flm validate by hand"}) {
		t.Errorf("Doctor() with an unready stack and no reason = %v", got)
	}
	fakeCommand(t, "flm", `echo 'Segmentation fault'; exit 139`)
	if got := devices(root); got[1] != (Check{"FAIL", `flm validate --json did not say (exit status 139): "Segmentation fault"; run it by hand`}) {
		t.Errorf("Doctor() with a crashing flm = %v", got)
	}
}

func TestDoctorModuleWithoutNode(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := tree(t, map[string]string{"sys/module/intel_vpu/version": "1.0\n"})
	got := devices(root)
	if len(got) != 2 || got[1] != (Check{"FAIL", "the intel_vpu module is loaded but made no /dev/accel node: its firmware did not load (dmesg | grep intel_vpu; the firmware files under /lib/firmware)"}) {
		t.Errorf("Doctor() with intel_vpu loaded and no node = %v", got)
	}
}

func TestDoctorRockchip(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := tree(t, map[string]string{
		"dev/dri/renderD128": "", "dev/dri/renderD129": "",
		"sys/bus/platform/drivers/rknpu/.keep":    "",
		"sys/bus/platform/drivers/panfrost/.keep": "",
		"sys/class/drm/renderD128/device/driver":  "-> ../../../../bus/platform/drivers/panfrost",
		"sys/class/drm/renderD129/device/driver":  "-> ../../../../bus/platform/drivers/rknpu",
		"sys/kernel/debug/rknpu/version":          "RKNPU driver: v0.9.8\n",
	})
	want := []Check{{"ok", "/dev/dri/renderD129 can be opened (rknpu v0.9.8)"}}
	if diff := cmp.Diff(want, devices(root)); diff != "" {
		t.Errorf("Doctor() of a Rockchip board (-want +got):\n%s", diff)
	}
	os.Remove(filepath.Join(root, "sys/kernel/debug/rknpu/version"))
	if got := devices(root); got[0] != (Check{"ok", "/dev/dri/renderD129 can be opened (rknpu, version in dmesg (grep 'Initialized rknpu'))"}) {
		t.Errorf("Doctor() of a Rockchip board without debugfs = %v", got)
	}
	os.Remove(filepath.Join(root, "dev/dri/renderD129"))
	if got := devices(root); got[0].Level != "FAIL" || !strings.Contains(got[0].What, "/dev/dri/renderD129 is missing") {
		t.Errorf("Doctor() of a Rockchip board without its node = %v", got)
	}
	root = tree(t, map[string]string{"sys/module/rknpu/parameters/x": ""})
	if got := devices(root); len(got) != 1 || !strings.Contains(got[0].What, "the rknpu driver is loaded but no render node is its") {
		t.Errorf("Doctor() with rknpu loaded and no node = %v", got)
	}
}
