package hold

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxFacts bounds what is read from a ticket: a file of another user can be
// as large as they like.
const maxFacts = 64 << 10

// outsideNS tells whether a file owned by uid may belong to a user outside
// this user namespace: in one (uidMap, /proc/self/uid_map, is not the
// identity "0 0 4294967295"), every owner it does not map shows as the
// overflow uid (/proc/sys/kernel/overflowuid).
func outsideNS(uid uint32, uidMap, overflow string) bool {
	f := strings.Fields(uidMap)
	if len(f) == 0 || len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295" {
		return false
	}
	o, err := strconv.ParseUint(strings.TrimSpace(overflow), 10, 32)
	if err != nil {
		o = 65534
	}
	return uint64(uid) == o
}

// fileStat is what the system says of a ticket's file.
type fileStat struct {
	uid     uint32    // its owner's uid; 0 on Windows, which has none
	owner   string    // its owner as the system names it: a uid, a SID
	mine    bool      // owned by this process's user
	id      fileID    // the file itself, whatever its names
	changed time.Time // its last status change (Unix) or write (Windows)
}

// readUpTo reads at most n bytes of f from its start.
func readUpTo(f *os.File, n int) []byte {
	b := make([]byte, n)
	m, _ := f.ReadAt(b, 0)
	return b[:m]
}

// read reads at most maxFacts bytes of f from its start.
func read(f *os.File) []byte { return readUpTo(f, maxFacts) }

func randomName() string {
	var r [8]byte
	rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// CheckDirPath says why path cannot be the lock directory, naming it by
// from (NPU_HOLD_DIR, --lock-dir), or nil. A relative path is a different
// directory in each working directory: two runs started in two would each
// take the first ticket of their own queue and hold the device at once. On
// Windows a network path is refused too (see checkLocal).
func CheckDirPath(from, path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s %q: a relative lock directory is a different one in each working directory, and two runs would hold the device at once; give an absolute path, e.g. %s", from, path, DefaultDir())
	}
	return checkLocal(from, path)
}
