package fakellm

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// The simulated serve's device memory: what a device's own account
// (nvidia-smi's compute apps) attributes to its process, and the model file
// it was asked to load, so that the gate's device-memory witness has both
// sides to weigh (all of the weights, a partial offload, none).

// WriteGGUF writes a GGUF (version 3) whose tensors hold tensorBytes of
// data: one metadata pair (general.architecture) and I8 tensors of at most
// 1 GiB each, the data section a hole (the file is sparse: a GiB of
// weights costs no disk).
func WriteGGUF(path string, tensorBytes int64) error {
	const chunk = 1 << 30
	var sizes []int64
	for left := tensorBytes; left > 0; left -= chunk {
		sizes = append(sizes, min(left, chunk))
	}
	var h []byte
	str := func(s string) {
		h = binary.LittleEndian.AppendUint64(h, uint64(len(s)))
		h = append(h, s...)
	}
	h = append(h, "GGUF"...)
	h = binary.LittleEndian.AppendUint32(h, 3)
	h = binary.LittleEndian.AppendUint64(h, uint64(len(sizes)))
	h = binary.LittleEndian.AppendUint64(h, 1)
	str("general.architecture")
	h = binary.LittleEndian.AppendUint32(h, 8) // a string
	str("llama")
	var off uint64
	for i, n := range sizes {
		str(fmt.Sprintf("blk.%d.ffn_up.weight", i))
		h = binary.LittleEndian.AppendUint32(h, 1) // dimensions
		h = binary.LittleEndian.AppendUint64(h, uint64(n))
		h = binary.LittleEndian.AppendUint32(h, 24) // GGML_TYPE_I8
		h = binary.LittleEndian.AppendUint64(h, off)
		off += (uint64(n) + 31) / 32 * 32
	}
	start := (int64(len(h)) + 31) / 32 * 32
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(h); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(start + int64(off)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ggufCommand is `fakellm gguf PATH MIB`: a model file of MIB MiB of
// weights for the simulated serve to be asked to load.
func ggufCommand(args []string, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: fakellm gguf PATH MIB")
		return 2
	}
	mib, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || mib < 0 || mib > 1<<24 {
		fmt.Fprintf(stderr, "fakellm gguf: %q is no size in MiB (0 to %d)\n", args[1], 1<<24)
		return 2
	}
	if err := WriteGGUF(args[0], mib<<20); err != nil {
		fmt.Fprintf(stderr, "fakellm gguf: %v\n", err)
		return 1
	}
	return 0
}

// writeAccount records the simulated serve's device memory where a fake
// nvidia-smi reads it: DIR/PID holds its row of `nvidia-smi
// --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`,
// "PID, MIB". It returns a function that removes the row (the process
// gone from the device).
func writeAccount(dir string, mib int64) (func(), error) {
	pid := os.Getpid()
	file := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.WriteFile(file, fmt.Appendf(nil, "%d, %d\n", pid, mib), 0o644); err != nil {
		return nil, err
	}
	return func() { os.Remove(file) }, nil
}
