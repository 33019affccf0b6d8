package config

import (
	"os"
	"testing"
)

// mkfifo makes what stands for a FIFO at path on Windows, which has none
// at a path (its named pipes live under \\.\pipe\): a directory, another
// file that is not a regular one.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
}
