package report

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// WriteJSONIn writes v as name in dir, a directory opened once: through a
// file of a fresh name created there (never through a symlink), then
// renamed to name. Whatever dir's path leads to later is not written.
func WriteJSONIn(dir *os.Root, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomicIn(dir, name, append(b, '\n'))
}

// WriteFileIn writes b as name in dir, as WriteJSONIn does.
func WriteFileIn(dir *os.Root, name string, b []byte) error {
	return writeAtomicIn(dir, name, b)
}

func writeAtomicIn(dir *os.Root, name string, b []byte) error {
	var tmp string
	var f *os.File
	for range 100 {
		var r [8]byte
		rand.Read(r[:])
		tmp = "." + name + "." + hex.EncodeToString(r[:])
		var err error
		f, err = dir.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	if f == nil {
		return fmt.Errorf("no free name for %s in %s", name, dir.Name())
	}
	_, err := f.Write(b)
	if err == nil {
		err = f.Chmod(0o644) // whatever the umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Rename(tmp, name)
	}
	if err != nil {
		dir.Remove(tmp)
		return err
	}
	return nil
}

// WriteIn is Write into dir, a directory opened once (WriteJSONIn): the
// same result.json as WriteResult's, without the replies' tokens and
// bounded.
func WriteIn(dir *os.Root, r *Result) error {
	b, err := resultBytes(ResultFile, r)
	if err != nil {
		return err
	}
	if err := writeAtomicIn(dir, ResultFile, b); err != nil {
		return err
	}
	return writeAtomicIn(dir, SummaryFile, []byte(Markdown(r, MarkdownLimit)))
}
