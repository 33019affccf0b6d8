//go:build windows

package energy

import (
	"fmt"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/windows"
)

// WritableByServe says how the serve could set what the sensor file at
// path reads, or "" when it could not: config.SensorWritableBy on Windows.
// The serve runs as the gate's own account (its token), so the question is
// whether this account could: the file, and every directory from it up to
// its drive's root, along the path as given and the one it leads to, must
// belong to another account, and their ACLs grant this account, or a group
// it is in, no right to change them: on the file its data, and on each
// its owner, ACL or deletion (WRITE_OWNER, WRITE_DAC, DELETE), and on each
// directory the deletion of what it holds (FILE_DELETE_CHILD), by which
// the file could be replaced. An elevated account (an administrator's
// full token) can take any file: only a sensor it cannot reach as a file
// is out of its reach, as root's on Linux.
func WritableByServe(path string) string {
	tok := windows.GetCurrentProcessToken()
	u, err := tok.GetTokenUser()
	if err != nil {
		return "this account cannot be told: " + err.Error()
	}
	return writableBy(path, &token{t: tok, user: u.User.Sid}, security)
}

// account is who the serve runs as.
type account interface {
	// is reports whether sid is the account's user or a group its token
	// holds enabled.
	is(sid *windows.SID) bool
	elevated() bool
}

// ace is an entry of a DACL.
type ace struct {
	sid         *windows.SID
	mask        uint32
	allow       bool
	inheritOnly bool // applies to what is made in it, not to it
}

// secInfo is a file's owner and DACL (null: no DACL, anyone may do
// anything).
type secInfo struct {
	owner    *windows.SID
	dacl     []ace
	nullDACL bool
}

// fileDeleteChild is FILE_DELETE_CHILD: a directory's right to delete
// what it holds.
const fileDeleteChild = 0x40

// Rights that change a file or what a directory holds.
const (
	rightsAny  = windows.WRITE_DAC | windows.WRITE_OWNER | windows.DELETE | windows.GENERIC_ALL
	rightsFile = rightsAny | windows.FILE_WRITE_DATA | windows.FILE_APPEND_DATA | windows.GENERIC_WRITE
	rightsDir  = rightsAny | fileDeleteChild
)

func writableBy(path string, who account, look func(string) (secInfo, error)) string {
	if who.elevated() {
		return "the serve runs elevated, as the gate does, and an administrator's full token can take and write any file"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err.Error()
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err.Error()
	}
	paths := []string{abs}
	if real != abs {
		paths = append(paths, real)
	}
	for _, path := range paths {
		for p := path; ; p = filepath.Dir(p) {
			s, err := look(p)
			if err != nil {
				return fmt.Sprintf("%s: its owner and ACL cannot be read: %v", p, err)
			}
			replaced := ""
			if p != path {
				replaced = ": the file in it could be replaced"
			}
			if s.owner != nil && who.is(s.owner) {
				return fmt.Sprintf("%s belongs to %s, the serve's account or a group it is in%s", p, sidName(s.owner), replaced)
			}
			if s.nullDACL {
				return fmt.Sprintf("%s has no DACL: anyone may write it%s", p, replaced)
			}
			rights := uint32(rightsDir)
			if p == path {
				rights = rightsFile
			}
			for _, a := range s.dacl {
				if a.allow && !a.inheritOnly && a.mask&rights != 0 && who.is(a.sid) {
					return fmt.Sprintf("%s may be changed by %s (its ACL grants %#x), the serve's account or a group it is in%s", p, sidName(a.sid), a.mask, replaced)
				}
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return ""
}

// token is the gate's own account.
type token struct {
	t    windows.Token
	user *windows.SID
}

func (k *token) is(sid *windows.SID) bool {
	if sid.Equals(k.user) {
		return true
	}
	ok, err := windows.Token(0).IsMember(sid)
	return err == nil && ok
}

func (k *token) elevated() bool { return k.t.IsElevated() }

// security reads a file's owner and DACL.
func security(p string) (secInfo, error) {
	sd, err := windows.GetNamedSecurityInfo(p, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return secInfo{}, err
	}
	var s secInfo
	if s.owner, _, err = sd.Owner(); err != nil {
		return secInfo{}, err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return secInfo{}, err
	}
	if dacl == nil {
		s.nullDACL = true
		return s, nil
	}
	for i := range uint32(dacl.AceCount) {
		var e *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &e); err != nil {
			return secInfo{}, err
		}
		s.dacl = append(s.dacl, ace{
			sid:         (*windows.SID)(unsafe.Pointer(&e.SidStart)),
			mask:        uint32(e.Mask),
			allow:       e.Header.AceType == windows.ACCESS_ALLOWED_ACE_TYPE,
			inheritOnly: e.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0,
		})
	}
	return s, nil
}

// sidName is an account's DOMAIN\name, or its SID.
func sidName(sid *windows.SID) string {
	if acct, dom, _, err := sid.LookupAccount(""); err == nil {
		if dom == "" {
			return acct
		}
		return dom + `\` + acct
	}
	return sid.String()
}
