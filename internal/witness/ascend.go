package witness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxToolRows is how many rows of a vendor tool's process table are read.
const MaxToolRows = 4096

// otherNodes are the device nodes of other vendors' devices: a serve that
// holds one of them and no Ascend node computes on that device.
var otherNodes = []string{"/dev/nvidia", "/dev/kfd", "/dev/dri/", "/dev/accel/"}

// asksNPUSMI reports whether npu-smi is asked of a serve holding held (the
// nodes of the classes it holds): where the classes include Ascend's
// nodes and it holds one of them, or holds only nodes of no other
// vendor's (a class the user named). A serve of a preset with many
// classes (llama.cpp) that holds an NVIDIA GPU's node is not Ascend's to
// witness.
func (r *Reader) asksNPUSMI(held []string) bool {
	if len(held) == 0 || !slices.ContainsFunc(r.Devices, func(g string) bool { return strings.HasPrefix(g, "/dev/davinci") }) {
		return false
	}
	if slices.ContainsFunc(held, func(h string) bool { return strings.HasPrefix(h, "/dev/davinci") }) {
		return true
	}
	return !slices.ContainsFunc(held, func(h string) bool {
		return slices.ContainsFunc(otherNodes, func(o string) bool { return strings.HasPrefix(h, o) })
	})
}

// npuSMI asks Ascend's npu-smi for the device memory of the serve's
// processes. "npu-smi info" prints, after its chips, a process table:
//
//	| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
//	| 0       0                 | 55115         | python                   | 30784                   |
//	| No running processes found in NPU 5                                                            |
//
// and newer versions a sixth column, "Process id in container" (NA for a
// process of the host). The process id is the host's; the container's id
// is the one the gate sees when it runs in that container, so a pid of
// the serve's in either column is the serve's. The name is the process's
// own (untrusted, and it may hold a "|"): the id is read from the left
// and the memory from the right, and the name is never shown.
func (r *Reader) npuSMI(ctx context.Context, pids []int) Tool {
	t := Tool{Name: "npu-smi"}
	ctx, cancel := context.WithTimeout(ctx, ToolWait)
	defer cancel()
	out, err := r.run(ctx, "npu-smi", "info")
	if err != nil {
		t.Why = reason(err)
		return t
	}
	ours := map[int]bool{}
	for _, p := range pids {
		ours[p] = true
	}
	table, container, listed, rows := false, false, 0, 0
	var chips chipMemory
	for line := range strings.SplitSeq(string(out), "\n") {
		cells := cellsOf(line)
		if !table {
			chips.read(cells)
			if len(cells) >= 4 && cells[1] == "Process id" && strings.HasPrefix(cells[len(cells)-1], "Process") {
				table = true
				container = cells[len(cells)-1] == "Process id in container"
			}
			continue
		}
		if rows++; rows > MaxToolRows {
			t.Why = fmt.Sprintf("more than %d rows in its process table: not read", MaxToolRows)
			return t
		}
		want := 4
		if container {
			want = 5
		}
		if len(cells) < want {
			continue // a rule, or "No running processes found in NPU N"
		}
		pid, err := strconv.Atoi(cells[1])
		if err != nil || pid <= 0 {
			continue
		}
		memCell, inContainer := cells[len(cells)-1], ""
		if container {
			memCell, inContainer = cells[len(cells)-2], cells[len(cells)-1]
		}
		mib, err := strconv.ParseInt(memCell, 10, 64)
		if err != nil || mib < 0 || mib > 1<<30 {
			continue
		}
		listed++
		cpid, _ := strconv.Atoi(inContainer)
		if ours[pid] || (cpid > 0 && ours[cpid]) {
			t.Listed = true
			t.MemoryBytes += mib << 20
			if ours[pid] {
				t.addProc(pid, mib<<20)
			} else {
				t.addProc(cpid, mib<<20)
			}
		}
	}
	t.Account = table && listed > 0
	switch {
	case !table:
		t.Why = "printed no process table (no \"Process id\" column)"
	case !t.Listed:
		t.Why = fmt.Sprintf("lists none of the serve's processes (%d listed)", listed)
	default:
		t.pastDevice(chips.size(), "chips", "npu-smi info's "+chips.column)
	}
	return t
}

// chipMemory is the memory of the chips npu-smi info lists before its
// process table, read from the chip table: under a header whose third
// column ends with HBM-Usage(MB) (or, with no HBM, Memory-Usage(MB)), each
// chip's row (its second cell a PCI bus id) ends that column with "used /
// total" in MB:
//
//	| Chip                 | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
//	| 0                    | 0000:C1:00.0  | 0           1198 / 15137      30711/ 32768         |
//
// the last pair is the column's. A chip's row with no such pair, or a
// total that is no size, leaves the size unknown (0), as does a table
// with no such header.
type chipMemory struct {
	column string // "HBM-Usage(MB)", "Memory-Usage(MB)"; "" before the header
	mib    int64
	chips  int
	bad    bool
}

func (c *chipMemory) read(cells []string) {
	if len(cells) < 3 {
		return
	}
	for _, col := range []string{"HBM-Usage(MB)", "Memory-Usage(MB)"} {
		if strings.HasSuffix(cells[2], col) {
			c.column = col
			return
		}
	}
	if c.column == "" || !busID(cells[1]) {
		return
	}
	i := strings.LastIndex(cells[2], "/")
	total, _, _ := strings.Cut(strings.TrimSpace(cells[2][i+1:]), " ")
	m, err := strconv.ParseInt(total, 10, 64)
	if c.chips++; i < 0 || err != nil || m <= 0 || m > maxMiB || c.chips > MaxToolRows {
		c.bad = true
		return
	}
	c.mib = min(c.mib+m, maxMiB)
}

// size is the chips' memory in bytes, 0 where not known.
func (c *chipMemory) size() int64 {
	if c.bad || c.chips == 0 {
		return 0
	}
	return c.mib << 20
}

// busID reports whether s is a PCI bus id, 0000:C1:00.0.
func busID(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, r := range s {
		if i != 4 && i != 7 && i != 10 && !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// cellsOf is a table row's cells, trimmed: "| a | b |" is [a b].
func cellsOf(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	cells := strings.Split(strings.Trim(line, "|"), "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
}
