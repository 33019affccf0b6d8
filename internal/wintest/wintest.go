// Package wintest is what the tests of the Windows code need to run under
// Wine as on Windows: a test directory Wine can remove, and whether the
// tests run under Wine, for the few that meet a gap of Wine's (each says
// which).
package wintest

import (
	"os"
	"runtime"
	"testing"
)

// TempDir is t.TempDir, emptied file by file before t.TempDir's own
// cleanup on Windows (see emptyAtEnd).
func TempDir(t testing.TB) string {
	d := t.TempDir()
	emptyAtEnd(t, d)
	return d
}

// SkipOnWine skips t under Wine, saying why: a gap of Wine's, never a
// behaviour of Windows.
func SkipOnWine(t testing.TB, why string) {
	t.Helper()
	if Wine() {
		t.Skip("under Wine: " + why)
	}
}

// Symlink makes newname a symbolic link to oldname for a test of links,
// or skips the test where that cannot be shown: under Wine, whose links
// Windows programs do not read as Windows does (SkipOnWine), and on a
// Windows without the right to make them (Developer Mode off, not an
// administrator).
func Symlink(t testing.TB, oldname, newname string) {
	t.Helper()
	SkipOnWine(t, "Wine 8 does not read its symbolic links as Windows does: one opened reads as missing (File not found), one opened without following it is not seen as a reparse point")
	if err := os.Symlink(oldname, newname); err != nil {
		if runtime.GOOS == "windows" {
			t.Skipf("this Windows user may not make symbolic links (%v): turn Developer Mode on, or run as an administrator", err)
		}
		t.Fatal(err)
	}
}

// NoRootRemove is why a test that checks what os.Root's Remove removed is
// skipped under Wine.
const NoRootRemove = "os.Root's Remove asks for FileDispositionInformationEx, which Wine 8 does not implement: the file stays"
