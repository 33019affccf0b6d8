//go:build windows

package hold

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// Doctor looks at what a serve on the device needs, as this account sees
// it: the NPUs (Device Manager's "Neural processors", device class
// ComputeAccelerator) and display adapters present, each one's state and
// driver; the session (a service runs in session 0); whether the account
// is an administrator (none is needed); and the lock directory. Root and
// memlock are Linux's and are not used.
func Doctor(root, lockDir string, memlock uint64) []Check {
	return doctor(system{}, lockDir)
}

// pnpDevice is a device as Plug and Play says it: present, with its node's
// state and its driver.
type pnpDevice struct {
	Name       string // the friendly name, else the device description
	InstanceID string
	Status     uint32 // DN_* flags (CM_Get_DevNode_Status)
	Problem    uint32 // CM_PROB_*: Device Manager's "Code N"; 0 for none
	Provider   string // the driver's provider
	Version    string // the driver's version
	Date       string // the driver's date
}

// winSystem is what the doctor reads of Windows; tests give fakes (Wine has
// no NPU, no service and one user).
type winSystem interface {
	// devices are the present devices of a setup class.
	devices(class windows.GUID) ([]pnpDevice, error)
	// session is this process's session (ProcessIdToSessionId).
	session() (uint32, error)
	admin() bool
	user() string
}

// The setup classes the doctor lists: Device Manager's "Neural processors"
// and "Display adapters".
var (
	classComputeAccelerator = windows.GUID{Data1: 0xf01a9d53, Data2: 0x3ff6, Data3: 0x48d2, Data4: [8]byte{0x9f, 0x97, 0xc8, 0xa7, 0x00, 0x4b, 0xe1, 0x0c}}
	classDisplay            = windows.GUID{Data1: 0x4d36e968, Data2: 0xe325, Data3: 0x11ce, Data4: [8]byte{0xbf, 0xc1, 0x08, 0x00, 0x2b, 0xe1, 0x03, 0x18}}
)

// problems are Device Manager's codes a device's node may show, and what
// they mean (CM_PROB_*, cfg.h; learn.microsoft.com, "Device Manager error
// messages").
var problems = map[uint32]string{
	1:  "it is not configured correctly",
	3:  "its driver may be corrupted, or the system is low on memory",
	10: "it cannot start",
	12: "it cannot find enough free resources",
	14: "it cannot work until the machine is restarted",
	18: "its driver must be reinstalled",
	19: "its registry entries are damaged",
	21: "Windows is removing it",
	22: "it is disabled",
	24: "it is not present, not working, or lacks its drivers",
	28: "its driver is not installed",
	29: "the firmware disabled it",
	31: "it is not working properly: Windows cannot load its driver",
	32: "its driver's service is disabled",
	37: "its driver failed to initialise",
	39: "its driver cannot be loaded (corrupted or missing)",
	43: "Windows stopped it: it reported problems",
	45: "it is not connected",
	47: "it was prepared for safe removal",
	48: "its driver is blocked for known problems",
	52: "its driver's signature cannot be verified",
}

// doctor is Doctor on what sys says.
func doctor(sys winSystem, lockDir string) []Check {
	var cs []Check
	add := func(level, format string, args ...any) {
		cs = append(cs, Check{level, fmt.Sprintf(format, args...)})
	}
	who := clip(sys.user(), maxName)
	npus, err := sys.devices(classComputeAccelerator)
	switch {
	case err != nil:
		add("FAIL", "the NPUs (Neural processors) cannot be listed as %s: %v", who, err)
	case len(npus) == 0:
		add("FAIL", "no NPU under Neural processors (device class ComputeAccelerator) is present to %s: install the NPU's driver (Intel NPU, AMD Ryzen AI NPU, Qualcomm Hexagon NPU) and check the NPU is enabled in the firmware setup", who)
	}
	for _, d := range npus {
		cs = append(cs, deviceCheck(d, "FAIL", "NPU"))
	}
	adapters, err := sys.devices(classDisplay)
	if err != nil {
		add("warn", "the display adapters cannot be listed as %s: %v", who, err)
	}
	for _, d := range adapters {
		c := deviceCheck(d, "warn", "display adapter")
		if c.Level == "ok" {
			c.Level = "info"
		}
		cs = append(cs, c)
	}

	switch s, err := sys.session(); {
	case err != nil:
		add("warn", "this process's session cannot be read: %v", err)
	case s == 0:
		add("warn", "%s runs in session 0, a service's: some NPUs have been reported invisible to their runtime outside the desktop's session (openvinotoolkit/openvino #28836, from Remote Desktop); the NPUs above are what Plug and Play shows this account, so run the serve once as the runner's service to see that its runtime finds the NPU (docs/runner.md)", who)
	default:
		add("ok", "%s runs in session %d (not a service's session 0): a runner run as a service runs in session 0, so run npu-hold doctor as the service's account too", who, s)
	}
	if sys.admin() {
		add("warn", "%s is an administrator: npu-hold and the gate need none, and a runner's service account (NETWORK SERVICE by default) is not one, so check as that account", who)
	} else {
		add("ok", "%s is not an administrator (none is needed)", who)
	}
	add("ok", "memlock limit: none on Windows")

	if err := CheckDirPath("the lock directory", lockDir); err != nil {
		add("FAIL", "%v", err)
		return cs
	}
	switch dir, err := openLockDir(lockDir, false); {
	case isNotExist(err):
		add("FAIL", "lock directory %s does not exist: %s", lockDir, dirFix(lockDir))
	case err != nil:
		add("FAIL", "%v", err)
	default:
		dir.close()
		add("ok", "lock directory %s is shared: owned by this user, SYSTEM or the Administrators, and its ACL lets no one else delete in it", lockDir)
	}
	return cs
}

// deviceCheck is what is said of one device: bad at level when it has a
// problem or is not started, else ok with its driver.
func deviceCheck(d pnpDevice, bad, kind string) Check {
	name := clip(d.Name, maxShown)
	if name == "" {
		name = "an unnamed " + kind
	}
	if id := clip(d.InstanceID, maxShown); id != "" {
		name += " (" + id + ")"
	}
	driver := "driver " + strings.TrimSpace(clip(d.Provider, maxName)+" "+clip(d.Version, maxName))
	if d.Version == "" && d.Provider == "" {
		driver = "driver unknown"
	}
	if d.Date != "" {
		driver += ", " + clip(d.Date, maxName)
	}
	if d.Problem != 0 || d.Status&windows.DN_HAS_PROBLEM != 0 {
		why, ok := problems[d.Problem]
		if !ok {
			why = "see its Properties in Device Manager"
		}
		return Check{bad, fmt.Sprintf("%s %s has a problem (Device Manager's code %d: %s; %s): update or reinstall the driver from the vendor, then restart", kind, name, d.Problem, why, driver)}
	}
	if d.Status&windows.DN_STARTED == 0 {
		return Check{bad, fmt.Sprintf("%s %s is present but not started (%s): see its state in Device Manager, and the System event log", kind, name, driver)}
	}
	return Check{"ok", fmt.Sprintf("%s %s is present and started (%s)", kind, name, driver)}
}

// system is the Windows the doctor runs on.
type system struct{}

func (system) devices(class windows.GUID) ([]pnpDevice, error) {
	set, err := windows.SetupDiGetClassDevsEx(&class, "", 0, windows.DIGCF_PRESENT, 0, "")
	if err != nil {
		return nil, err
	}
	defer set.Close()
	var out []pnpDevice
	for i := 0; len(out) < maxDevices; i++ {
		data, err := set.EnumDeviceInfo(i)
		if err != nil {
			break // ERROR_NO_MORE_ITEMS
		}
		d := pnpDevice{Name: property(set, data, windows.SPDRP_FRIENDLYNAME)}
		if d.Name == "" {
			d.Name = property(set, data, windows.SPDRP_DEVICEDESC)
		}
		d.InstanceID, _ = set.DeviceInstanceID(data)
		if windows.CM_Get_DevNode_Status(&d.Status, &d.Problem, data.DevInst, 0) != nil {
			d.Status, d.Problem = 0, 0
		}
		if key := property(set, data, windows.SPDRP_DRIVER); key != "" {
			d.Provider, d.Version, d.Date = driverOf(key)
		}
		out = append(out, d)
	}
	return out, nil
}

// property is a device's string property, or "".
func property(set windows.DevInfo, data *windows.DevInfoData, p windows.SPDRP) string {
	v, err := set.DeviceRegistryProperty(data, p)
	if s, ok := v.(string); ok && err == nil {
		return s
	}
	return ""
}

// driverOf reads a device's driver key ({class GUID}\NNNN, SPDRP_DRIVER)
// under the class key: its provider, version and date, as Device Manager's
// Driver tab shows them.
func driverOf(key string) (provider, version, date string) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SYSTEM\CurrentControlSet\Control\Class\`+key, registry.QUERY_VALUE)
	if err != nil {
		return "", "", ""
	}
	defer k.Close()
	provider, _, _ = k.GetStringValue("ProviderName")
	version, _, _ = k.GetStringValue("DriverVersion")
	date, _, _ = k.GetStringValue("DriverDate")
	return provider, version, date
}

func (system) session() (uint32, error) {
	var s uint32
	err := windows.ProcessIdToSessionId(uint32(os.Getpid()), &s)
	return s, err
}

func (system) admin() bool { return isAdmin() }

func (system) user() string { return userName() }
