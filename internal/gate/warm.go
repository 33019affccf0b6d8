package gate

import (
	"os"
	"runtime"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// warmHeapBytes is how much of the heap warmHeap faults in: the run's own
// allocations from the serve's ready to its exit come to some 1 MB
// (replies, their files, the stop's reading of /proc, the report).
const warmHeapBytes = 4 << 20

// prepare does, while the serve loads, what the rest of the run would
// otherwise do on its way: the first rendering of a reply and a report
// (report.Prepare), and warmHeap. None of it waits on the serve; the first
// request waits for it (waitReady), so that none of it (a collection, its
// pauses) lands in a measured reply: a serve ready sooner than it, some
// 20 ms, waits the rest.
func prepare() {
	report.Prepare()
	warmHeap()
}

// prepareAhead is prepare, or a test's.
var prepareAhead = prepare

// warmHeap faults in the pages the run's later allocations come from. A Go
// heap grows into fresh pages until its first collection, and the first
// touch of each is a page fault (some 15 µs on a virtual machine whose
// page tables its host keeps: 30 of them a reply, 0.4 ms, between the end
// of one and the next request). It allocates warmHeapBytes, touches a byte
// a page and collects it: the pages stay the heap's, faulted in, and the
// allocations that follow reuse them.
func warmHeap() {
	b := make([]byte, warmHeapBytes)
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	runtime.GC()
}
