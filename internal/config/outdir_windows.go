//go:build windows

package config

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// privateDirAdvice says what --out to pass instead of one CheckPrivateDir
// refused.
const privateDirAdvice = "pass a directory that only you (or SYSTEM or Administrators) can write, under directories whose ACLs let no other account remove or replace what they hold, such as one in $RUNNER_TEMP or %LOCALAPPDATA%"

// CheckPrivateDir says why another user could change what is written in
// dir, or nil: on Windows, every directory from dir up to its volume's
// root, along the path as given and along the one it leads to, must belong
// to this user or to SYSTEM, Administrators or TrustedInstaller; dir's ACL
// must let no other account write in it, and its parents' ACLs no other
// account remove or replace what they hold (making new entries, which C:\
// lets every user do, replaces nothing). A directory another user may
// write can be given a link where the gate will write, at any time.
func CheckPrivateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	paths := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		paths = append(paths, real)
	}
	me, err := thisUser()
	if err != nil {
		return err
	}
	mine := func(sid *windows.SID) bool { return sid.Equals(me) }
	for _, path := range paths {
		for p := path; ; p = filepath.Dir(p) {
			s, err := readSecurity(p)
			if err != nil {
				return err
			}
			if !mine(s.owner) && !systemAccount(s.owner) {
				return fmt.Errorf("%s belongs to %s, who could replace what the gate writes there", p, account(s.owner))
			}
			if p == path {
				if who := s.others(rightsWrite, mine); who != "" {
					return fmt.Errorf("%s may be written by %s (its ACL), who could put a link where the gate writes", p, who)
				}
			} else if who := s.others(rightsReplace, mine); who != "" {
				return fmt.Errorf("%s lets %s remove or replace what it holds (its ACL), so they could replace the directory in it", p, who)
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return nil
}
