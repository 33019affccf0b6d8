//go:build windows

package report

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// noFollow makes an open of a reparse point (a symlink, a junction) open
// the reparse point itself rather than what it names; isLink then tells
// it and the reader refuses it. So on Windows as on Linux nothing is read
// or written through a link at the name's end: with O_CREATE|O_EXCL the
// name is made new (an existing one, link or not, fails), and a file
// opened to be read is the file at the name, or refused. A link in a
// directory above the name is followed on both, as the directory a user
// passes may be one.
const noFollow = syscall.FILE_FLAG_OPEN_REPARSE_POINT

// isLink tells whether f is a name surrogate: a symlink, a junction or
// another reparse point that stands for a name elsewhere (a reparse point
// that is its own data, such as a deduplicated file, is not).
func isLink(f *os.File) bool {
	var info struct {
		attributes uint32
		tag        uint32
	}
	err := windows.GetFileInformationByHandleEx(windows.Handle(f.Fd()), windows.FileAttributeTagInfo, (*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)))
	if err != nil {
		return false // the Stat that follows says what is wrong
	}
	return info.attributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 && info.tag&nameSurrogate != 0
}

// nameSurrogate is IsReparseTagNameSurrogate's bit of a reparse tag.
const nameSurrogate = 0x20000000
