package gate

import (
	"fmt"
	"os"
	"sync"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// replyFiles writes each reply's file (reply_N.json) as the reply ends,
// beside the next request: the file's bytes are made at once (they may drop
// the reply's tokens, in the reply too, report.ReplyBytes), and written by
// a goroutine of their own while the next request is asked. A file is
// written as soon as it was when the asking waited for it, so a killed gate
// loses none it would have kept; the next request no longer waits for the
// disk (some 0.3-0.6 ms a reply on a small machine).
//
// wait returns once every file is written; the run waits for it before its
// result is written.
type replyFiles struct {
	dir *os.Root
	// writeFile writes a file into dir: report.WriteFileIn, or a test's.
	writeFile func(dir *os.Root, name string, b []byte) error
	wg        sync.WaitGroup

	mu   sync.Mutex
	errs []string // the errors not yet said
}

// write starts the writing of r's file.
func (f *replyFiles) write(r *measure.Reply) {
	name := report.ReplyFile(r)
	b, err := report.ReplyBytes(name, r)
	if err != nil {
		f.fail(name, err)
		return
	}
	write := f.writeFile
	if write == nil {
		write = report.WriteFileIn
	}
	f.wg.Go(func() {
		if err := write(f.dir, name, b); err != nil {
			f.fail(name, err)
		}
	})
}

func (f *replyFiles) fail(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf("error: writing %s: %v", name, err))
}

// failures are the errors of the writes done since it was last asked, for
// the console: they are said by whoever asks, never by the writing
// goroutine, so they do not break into another line.
func (f *replyFiles) failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.errs
	f.errs = nil
	return e
}

// wait returns once every file is written, with the errors not yet said.
func (f *replyFiles) wait() []string {
	f.wg.Wait()
	return f.failures()
}
