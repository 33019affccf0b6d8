package witness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSample is one reading of a process (this one) holding fds
// "device" descriptors and a mapped "backend": what each of a run's two
// readings costs, outside the timed replies.
func BenchmarkSample(b *testing.B) {
	dir := b.TempDir()
	lib := filepath.Join(dir, "libggml-cann.so")
	if err := os.WriteFile(lib, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	unmap, err := mapFile(lib)
	if err != nil {
		b.Fatal(err)
	}
	defer unmap()
	for _, fds := range []int{1, 1000} {
		b.Run(map[int]string{1: "1-device-fd", 1000: "1000-device-fds"}[fds], func(b *testing.B) {
			for range fds {
				f, err := os.Open("/dev/zero")
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
			}
			r := &Reader{Proc: "/proc", Devices: []string{"/dev/zero"}, Libraries: []string{"libggml-cann*.so*"}}
			pids := []int{os.Getpid()}
			for b.Loop() {
				s := r.Sample(context.Background(), pids)
				if len(s.Held) != 1 || len(s.Mapped) != 1 {
					b.Fatalf("Sample = %+v", s)
				}
			}
		})
	}
}
