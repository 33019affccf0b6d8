//go:build windows

package config

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// SensorWritableBy says how the serve could set what the sensor file at
// path reads, or "" when it could not. On Windows the serve runs as the
// gate's user (uid, Linux's, is not used): the file, and every directory
// from it up to its volume's root, along the path as given and the one it
// leads to, must belong to another account than this user, and their ACLs
// give no account but their owner and SYSTEM, Administrators and
// TrustedInstaller the right to write the file, or to remove or replace
// what the directories hold: the rule CheckPrivateDir applies to --out,
// turned round.
func SensorWritableBy(path string, _ uint32) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err.Error()
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err.Error()
	}
	me, err := thisUser()
	if err != nil {
		return err.Error()
	}
	paths := []string{abs}
	if real != abs {
		paths = append(paths, real)
	}
	for _, path := range paths {
		for p := path; ; p = filepath.Dir(p) {
			s, err := readSecurity(p)
			if err != nil {
				return err.Error()
			}
			if s.owner.Equals(me) {
				if p == path {
					return fmt.Sprintf("%s belongs to %s, the serve's user", p, account(me))
				}
				return fmt.Sprintf("%s belongs to %s, the serve's user: the file in it could be replaced", p, account(me))
			}
			owner := func(sid *windows.SID) bool { return sid.Equals(s.owner) }
			if p == path {
				if who := s.others(rightsWrite, owner); who != "" {
					return fmt.Sprintf("%s may be written by %s (its ACL)", p, who)
				}
			} else if who := s.others(rightsReplace, owner); who != "" {
				return fmt.Sprintf("%s lets %s remove or replace what it holds (its ACL): the file in it could be replaced", p, who)
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return ""
}
