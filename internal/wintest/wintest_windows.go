//go:build windows

package wintest

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// Wine tells whether this program runs under Wine: ntdll exports
// wine_get_version there, or the user's registry holds Software\Wine.
var Wine = sync.OnceValue(func() bool {
	if windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil {
		return true
	}
	k, err := registry.OpenKey(registry.CURRENT_USER, `Software\Wine`, registry.QUERY_VALUE)
	if err == nil {
		k.Close()
		return true
	}
	return false
})

// emptyAtEnd removes d's test directory (d's parent, t.TempDir's own
// directory for the test), what is in it deepest first, with os.Remove
// before t.TempDir's cleanup runs (cleanups run last registered first):
// Wine 8 does not implement the FileDispositionInformationEx that
// os.RemoveAll (and os.Root's Remove) asks for, and answers with a status
// Go does not take for "use the older call", so t.TempDir's own removal
// fails ("Invalid function") for every file and directory; os.Remove's
// DeleteFile and RemoveDirectory work. What is left (a file a process
// still holds open) t.TempDir's cleanup reports.
func emptyAtEnd(t testing.TB, d string) {
	t.Cleanup(func() {
		top := filepath.Dir(d)
		var paths []string
		filepath.WalkDir(top, func(p string, _ fs.DirEntry, err error) error {
			paths = append(paths, p)
			return nil
		})
		for _, p := range slices.Backward(paths) {
			os.Remove(p)
		}
	})
}
