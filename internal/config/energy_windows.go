//go:build windows

package config

import (
	"golang.org/x/sys/windows"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
)

// ServeUID stands for the serve's account where a uid is asked: the serve
// runs as the gate's own account, 0 where that account is elevated (an
// administrator's full token, which can take any file, as root can), 1
// where it is not.
func ServeUID() uint32 {
	if windows.GetCurrentProcessToken().IsElevated() {
		return 0
	}
	return 1
}

// SensorWritableBy says how the serve, which runs as the gate's own
// account, could set what the sensor file at path reads, or "" when it
// could not: the owner and ACL of the file and of every directory above
// it (energy.WritableByServe). uid is ServeUID's.
func SensorWritableBy(path string, uid uint32) string {
	return energy.WritableByServe(path)
}
