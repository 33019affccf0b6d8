//go:build windows

package hold

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

// fakeSystem is a Windows as the doctor reads it.
type fakeSystem struct {
	npus, adapters []pnpDevice
	npuErr, adErr  error
	sess           uint32
	sessErr        error
	isAdmin        bool
}

func (f fakeSystem) devices(class windows.GUID) ([]pnpDevice, error) {
	switch class {
	case classComputeAccelerator:
		return f.npus, f.npuErr
	case classDisplay:
		return f.adapters, f.adErr
	}
	return nil, errors.New("no such class")
}
func (f fakeSystem) session() (uint32, error) { return f.sess, f.sessErr }
func (f fakeSystem) admin() bool              { return f.isAdmin }
func (f fakeSystem) user() string             { return `RUNNER\ci` }

const started = windows.DN_STARTED | windows.DN_DRIVER_LOADED

var intelNPU = pnpDevice{Name: "Intel(R) AI Boost", InstanceID: `PCI\VEN_8086&DEV_7D1D\3&11583659&0&58`, Status: started, Provider: "Intel Corporation", Version: "32.0.100.3104", Date: "11-12-2024"}

// Each line of the doctor on Windows, against fakes: the NPU (present and
// started, with its driver; absent; with a problem; not started; not
// listable), the display adapters, the session, the account, and the lock
// directory.
func TestDoctorWindowsLines(t *testing.T) {
	dir := newEnv(t).dir
	if err := (&Device{Dir: dir, Name: "npu"}).CheckDir(); err != nil {
		t.Fatal(err)
	}
	unnamed := pnpDevice{Status: started}
	for _, c := range []struct {
		name string
		sys  fakeSystem
		dir  string
		want []Check
	}{
		{"healthy", fakeSystem{npus: []pnpDevice{intelNPU}, adapters: []pnpDevice{{Name: "Intel(R) Arc(TM) Graphics", Status: started, Provider: "Intel Corporation", Version: "32.0.101.6129"}}, sess: 1}, dir, []Check{
			{"ok", `NPU Intel(R) AI Boost (PCI\VEN_8086&DEV_7D1D\3&11583659&0&58) is present and started (driver Intel Corporation 32.0.100.3104, 11-12-2024)`},
			{"info", "display adapter Intel(R) Arc(TM) Graphics is present and started (driver Intel Corporation 32.0.101.6129)"},
			{"ok", `RUNNER\ci runs in session 1 (not a service's session 0): a runner run as a service runs in session 0, so run npu-hold doctor as the service's account too`},
			{"ok", `RUNNER\ci is not an administrator (none is needed)`},
			{"ok", "memlock limit: none on Windows"},
			{"ok", "lock directory " + dir + " is shared: owned by this user, SYSTEM or the Administrators, and its ACL lets no one else delete in it"},
		}},
		{"no NPU, a service, an administrator", fakeSystem{adapters: []pnpDevice{unnamed}, isAdmin: true}, dir, []Check{
			{"FAIL", `no NPU under Neural processors (device class ComputeAccelerator) is present to RUNNER\ci: install the NPU's driver (Intel NPU, AMD Ryzen AI NPU, Qualcomm Hexagon NPU) and check the NPU is enabled in the firmware setup`},
			{"info", "display adapter an unnamed display adapter is present and started (driver unknown)"},
			{"warn", `RUNNER\ci runs in session 0, a service's: some NPUs have been reported invisible to their runtime outside the desktop's session (openvinotoolkit/openvino #28836, from Remote Desktop); the NPUs above are what Plug and Play shows this account, so run the serve once as the runner's service to see that its runtime finds the NPU (docs/runner.md)`},
			{"warn", `RUNNER\ci is an administrator: npu-hold and the gate need none, and a runner's service account (NETWORK SERVICE by default) is not one, so check as that account`},
			{"ok", "memlock limit: none on Windows"},
			{"ok", "lock directory " + dir + " is shared: owned by this user, SYSTEM or the Administrators, and its ACL lets no one else delete in it"},
		}},
		{"an NPU with a problem, one not started, adapters unlisted", fakeSystem{
			npus:    []pnpDevice{{Name: "NPU Compute Accelerator Device", Status: windows.DN_HAS_PROBLEM, Problem: 43, Provider: "Advanced Micro Devices", Version: "32.0.203.240"}, {Name: "Snapdragon(R) X Elite - X1E80100 - Qualcomm(R) Hexagon(TM) NPU", Status: windows.DN_DRIVER_LOADED}, {Name: "x", Problem: 99}},
			adErr:   errors.New("Access is denied."),
			sessErr: errors.New("Access is denied."),
		}, `\\server\share\npu-hold`, []Check{
			{"FAIL", "NPU NPU Compute Accelerator Device has a problem (Device Manager's code 43: Windows stopped it: it reported problems; driver Advanced Micro Devices 32.0.203.240): update or reinstall the driver from the vendor, then restart"},
			{"FAIL", "NPU Snapdragon(R) X Elite - X1E80100 - Qualcomm(R) Hexagon(TM) NPU is present but not started (driver unknown): see its state in Device Manager, and the System event log"},
			{"FAIL", "NPU x has a problem (Device Manager's code 99: see its Properties in Device Manager; driver unknown): update or reinstall the driver from the vendor, then restart"},
			{"warn", `the display adapters cannot be listed as RUNNER\ci: Access is denied.`},
			{"warn", "this process's session cannot be read: Access is denied."},
			{"ok", `RUNNER\ci is not an administrator (none is needed)`},
			{"ok", "memlock limit: none on Windows"},
			{"FAIL", `the lock directory "\\\\server\\share\\npu-hold" is not on a local disk (a UNC path, \\server\share): a lock on a share is its server's, shared with every machine that mounts it, and its owner and ACL are the server's; give a directory on a local disk, e.g. ` + DefaultDir()},
		}},
		{"NPUs unlisted, the lock directory missing", fakeSystem{npuErr: errors.New("The data area passed to a system call is too small."), sess: 2}, dir + `\none`, []Check{
			{"FAIL", `the NPUs (Neural processors) cannot be listed as RUNNER\ci: The data area passed to a system call is too small.`},
			{"ok", `RUNNER\ci runs in session 2 (not a service's session 0): a runner run as a service runs in session 0, so run npu-hold doctor as the service's account too`},
			{"ok", `RUNNER\ci is not an administrator (none is needed)`},
			{"ok", "memlock limit: none on Windows"},
			{"FAIL", "lock directory " + dir + `\none does not exist: ` + dirFix(dir+`\none`)},
		}},
	} {
		got := doctor(c.sys, c.dir)
		if len(got) != len(c.want) {
			t.Errorf("%s: doctor() = %d checks, want %d:\n%s", c.name, len(got), len(c.want), lines(got))
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: check %d =\n  %s %s\nwant\n  %s %s", c.name, i, got[i].Level, got[i].What, c.want[i].Level, c.want[i].What)
			}
		}
	}
}

// A device's name and driver are the driver's words: escaped and bounded.
func TestDoctorWindowsDeviceText(t *testing.T) {
	c := deviceCheck(pnpDevice{Name: "\x1b[2Jevil\n::error::x" + strings.Repeat("n", 400), Status: started, Provider: "\x07p", Version: "1"}, "FAIL", "NPU")
	if strings.ContainsAny(c.What, "\x1b\n\x07") || len([]rune(c.What)) > 2*maxShown {
		t.Errorf("deviceCheck(a hostile name) = %q", c.What)
	}
	if c.Level != "ok" {
		t.Errorf("deviceCheck(started) level = %q, want ok", c.Level)
	}
	if c := deviceCheck(pnpDevice{Name: "n", Status: started | windows.DN_HAS_PROBLEM}, "FAIL", "NPU"); c.Level != "FAIL" || !strings.Contains(c.What, "code 0") {
		t.Errorf("deviceCheck(DN_HAS_PROBLEM, no code) = %v, want FAIL", c)
	}
}

func lines(cs []Check) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Level + " " + c.What + "\n")
	}
	return b.String()
}

func hasCheck(cs []Check, level, what string) bool {
	for _, c := range cs {
		if c.Level == level && strings.Contains(c.What, what) {
			return true
		}
	}
	return false
}
