//go:build !windows

package energy

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// osKinds are the sources auto tries where the preset names none.
var osKinds = []string{"nvml", "npu-smi", "hwmon", "rapl"}

// withOSKinds is the order auto tries: the preset's as it is.
func withOSKinds(order []string) []string { return order }

// localAbs reports whether a sensor file's path is absolute.
func localAbs(path string) bool { return strings.HasPrefix(path, "/") }

// absHint is what an absolute path looks like here.
const absHint = ""

// whoAmI names this process's user in a reason.
func whoAmI() string { return fmt.Sprintf("uid %d", os.Getuid()) }

// readNumberOf is readNumber refusing a file uid serve owns (0: none).
func readNumberOf(path string, serve uint32) (float64, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	if err != nil {
		return 0, readErr(path, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, fmt.Errorf("%s is not a regular file", path)
	}
	if serve != 0 && st.Uid == serve {
		return 0, fmt.Errorf("%s belongs to uid %d, the serve's user, who could set it", path, serve)
	}
	buf := make([]byte, maxFile+1)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		return 0, readErr(path, err)
	}
	return number(path, buf, n)
}
