package vendortool

import (
	"fmt"
	"slices"
)

// A securityInfo is what othersWrite reads of a file or directory on
// Windows: its owner's SID, and the allow entries of its ACL that apply
// to it (entries only passed on to what is made in it are left out).
// noDACL is a security descriptor with no ACL at all, which lets every
// user do anything.
type securityInfo struct {
	owner  string
	noDACL bool
	allow  []allowEntry
}

type allowEntry struct {
	sid  string
	mask uint32
}

// The SIDs that may own a tool or a directory above it: this user's (its
// own files), SYSTEM, the Administrators, and TrustedInstaller, which owns
// C:\Windows\System32, where nvidia-smi.exe is installed.
const (
	sidSystem           = "S-1-5-18"
	sidAdministrators   = "S-1-5-32-544"
	sidTrustedInstaller = "S-1-5-80-956008885-3418522649-1831038044-1850242599-2686238709"
)

// everyUser are the groups every user of the machine is in, or every
// interactive one: an entry giving one of them a right gives it to any
// other user, as Linux's "others" bits do. An entry for one named user
// or group is that user's, as Linux's owner and group bits are (the group
// bits are not looked at there either).
var everyUser = []string{
	"S-1-1-0",      // Everyone
	"S-1-5-11",     // Authenticated Users
	"S-1-5-32-545", // Users
	"S-1-5-4",      // INTERACTIVE
}

// The access rights that let a user replace what a file holds or another
// file in its place (file rights and their directory names: FILE_WRITE_DATA
// is FILE_ADD_FILE, FILE_APPEND_DATA is FILE_ADD_SUBDIRECTORY).
const (
	fileWriteData   = 0x2
	fileAppendData  = 0x4
	fileDeleteChild = 0x40
	accessDelete    = 0x10000
	writeDAC        = 0x40000
	writeOwner      = 0x80000
	genericAll      = 0x10000000
	genericWrite    = 0x40000000
)

// replace is what, given to every user on the tool or its directory, lets
// one of them change the tool or put another where PATH finds it first
// (a directory's FILE_ADD_FILE is enough: nvidia-smi.com comes before
// nvidia-smi.exe in PATHEXT's order). rename is what, on a directory
// above, lets one of them move a directory away and put another in its
// place; making a new directory in one (as every user may in C:\) does
// not, like /tmp's sticky bit.
const (
	rename  = accessDelete | fileDeleteChild | writeDAC | writeOwner | genericAll
	replace = rename | fileWriteData | fileAppendData | genericWrite
)

// othersMayWrite is othersWrite's judgement of one file on the way up
// from the tool: near is the tool itself or its directory. me is this
// process's user's SID.
func (s securityInfo) othersMayWrite(me string, near bool) bool {
	return s.changeable(me, near) != ""
}

// changeable is othersMayWrite said in words: why a user other than the
// trusted ones could change the file or directory, or "".
func (s securityInfo) changeable(me string, near bool) string {
	switch s.owner {
	case me, sidSystem, sidAdministrators, sidTrustedInstaller:
	default:
		return fmt.Sprintf("owned by %s, who may rewrite its ACL", s.owner)
	}
	if s.noDACL {
		return "has no ACL, which lets every user change it"
	}
	rights := uint32(rename)
	if near {
		rights = replace
	}
	for _, e := range s.allow {
		if e.mask&rights != 0 && slices.Contains(everyUser, e.sid) {
			return fmt.Sprintf("its ACL lets %s change it (access mask %#x)", e.sid, e.mask)
		}
	}
	return ""
}
