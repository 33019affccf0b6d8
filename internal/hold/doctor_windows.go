//go:build windows

package hold

import "fmt"

// Doctor looks at what a serve on the device needs. On Windows it checks
// the lock directory (its owner and ACL, see openLockDir); the device, its
// driver and firmware it names as not checked: npu-hold knows Linux's
// device nodes and sysfs, and nothing yet of Windows's NPU drivers. Root
// and memlock are Linux's and are not used.
func Doctor(root, lockDir string, memlock uint64) []Check {
	var cs []Check
	add := func(level, format string, args ...any) {
		cs = append(cs, Check{level, fmt.Sprintf(format, args...)})
	}
	add("warn", "the NPU, its driver and its firmware are not checked on Windows: npu-hold doctor knows Linux's device nodes and sysfs only; see the NPU under Neural processors in Device Manager, as the runner's account")
	add("ok", "memlock limit: none on Windows")
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
