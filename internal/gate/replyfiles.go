package gate

import (
	"fmt"
	"os"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// replyFiles writes each reply's file (reply_N.json) beside the next
// request, and prints the run's console lines in the order they were said,
// a reply's own once its file is on disk: a line that names a reply means
// its file is there, and a gate killed meanwhile loses, as ever, only the
// file of the reply it was writing, which no line has named.
//
// The reply's bytes are made as it ends (they may drop its tokens, in the
// reply too: report.ReplyBytes); a goroutine of its own writes them and
// prints the lines, while the next request is asked: the request no longer
// waits for the disk and the console (some 0.3-0.6 ms a reply on a small
// machine). While the serve runs, every line of the gate's goes through it
// (Gate.logf), so the console keeps the order the run said them in.
type replyFiles struct {
	dir *os.Root
	// writeFile writes a file into dir: report.WriteFileIn, or a test's.
	writeFile func(dir *os.Root, name string, b []byte) error
	// print prints a line, made safe already (console.Text).
	print func(line string)
	jobs  chan replyJob
	done  chan struct{}
	// unwritten is each file that could not be made or written, "name:
	// why", in the order said; read it once close has returned.
	unwritten []string
}

// replyJob is a file to write, if name is set, then lines to print. err is
// why the file could not be made: it is said, and not written.
type replyJob struct {
	name  string
	b     []byte
	err   error
	lines []string
}

// startReplyFiles starts the writing goroutine for dir; print prints a
// line.
func startReplyFiles(dir *os.Root, print func(string)) *replyFiles {
	f := &replyFiles{dir: dir, writeFile: report.WriteFileIn, print: print, jobs: make(chan replyJob, 64), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *replyFiles) run() {
	defer close(f.done)
	for j := range f.jobs {
		err := j.err
		if j.name != "" && err == nil {
			err = f.writeFile(f.dir, j.name, j.b)
		}
		if err != nil {
			f.unwritten = append(f.unwritten, j.name+": "+err.Error())
			f.print(failedLine(j.name, err))
		}
		for _, l := range j.lines {
			f.print(l)
		}
	}
}

// write writes r's file, then prints lines: after every line said
// before, and before every line said after.
func (f *replyFiles) write(r *measure.Reply, lines ...string) {
	name := report.ReplyFile(r)
	b, err := report.ReplyBytes(name, r)
	f.jobs <- replyJob{name: name, b: b, err: err, lines: lines}
}

// say prints line in its turn.
func (f *replyFiles) say(line string) {
	f.jobs <- replyJob{lines: []string{line}}
}

// close returns once every file is written and every line printed, and
// returns the files that could not be, each "name: why"; the files take
// nothing more.
func (f *replyFiles) close() []string {
	close(f.jobs)
	<-f.done
	return f.unwritten
}

func failedLine(name string, err error) string {
	return fmt.Sprintf("error: writing %s: %v", name, err)
}
