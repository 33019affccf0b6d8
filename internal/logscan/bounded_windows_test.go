package logscan

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// needSh skips a test that runs /bin/sh, which Windows has not:
// TestCaptureWindows and TestCaptureEscapedWindows run the same captures
// with this test binary as the serve.
func needSh(t *testing.T) {
	t.Skip("runs /bin/sh; TestCaptureWindows and TestCaptureEscapedWindows run its capture on Windows")
}

// TestServeHelper is the serve of the Windows capture tests, run as this
// test binary with LOGSCAN_SERVE set: "chatty" writes 20,000 lines ending
// in "\r\n" and a coloured slow-route line on stderr in the middle;
// "escaped" writes the fast-route line, makes the file named by
// LOGSCAN_SAID and waits 30 s with its output open.
func TestServeHelper(t *testing.T) {
	switch os.Getenv("LOGSCAN_SERVE") {
	case "chatty":
		for i := range 20000 {
			fmt.Printf("progress line %d of a chatty serve\r\n", i)
			if i == 9999 {
				fmt.Fprint(os.Stderr, "\x1b[31mno kernel: per-op forward\x1b[0m\r\n")
			}
		}
		os.Exit(0)
	case "escaped":
		fmt.Print("on the private route dx\r\n")
		os.WriteFile(os.Getenv("LOGSCAN_SAID"), nil, 0o644)
		time.Sleep(30 * time.Second)
		os.Exit(0)
	}
	t.Skip("the serve of TestCaptureWindows and TestCaptureEscapedWindows")
}

func serveHelper(t *testing.T, mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelper$")
	cmd.Env = append(os.Environ(), append(env, "LOGSCAN_SERVE="+mode)...)
	return cmd
}

// TestCaptureWindows: a Windows serve's 1 MiB of "\r\n" lines through the
// capture's pipes: the file keeps 64 KiB, the scan saw the stderr line in
// the middle, without its colour or carriage return.
func TestCaptureWindows(t *testing.T) {
	dir := wintest.TempDir(t)
	c, stdout, stderr, err := NewCapture(filepath.Join(dir, "serve.log"), 64<<10, matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	cmd := serveHelper(t, "chatty")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	stderr.Close()
	cmd.Wait()
	got, err := c.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got.Route.Slow == nil || got.Route.Slow.Line < 1 || got.Route.Slow.Line > 20001 || got.Route.Slow.Text != "no kernel: per-op forward" {
		t.Errorf("Route.Slow = %+v, want the stderr line without its colour or carriage return", got.Route.Slow)
	}
	fi, _ := os.Stat(filepath.Join(dir, "serve.log"))
	if fi.Size() > 64<<10 || got.Dropped == 0 || got.Written != got.Bytes {
		t.Errorf("serve.log %d bytes, Dropped %d, Written %d, scanned %d: want at most 64 KiB kept, the rest dropped, all scanned", fi.Size(), got.Dropped, got.Written, got.Bytes)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "serve.log")); !strings.HasSuffix(string(b), "progress line 19999 of a chatty serve\r\n") {
		t.Errorf("serve.log does not end with the serve's last line as written")
	}
}

// TestCaptureEscapedWindows: a process that keeps the pipe open past the
// stop does not hold the capture: a read waiting in ReadFile on an
// anonymous pipe, which no deadline ends, is cancelled, and Wait returns
// within its bound with what was written.
func TestCaptureEscapedWindows(t *testing.T) {
	c, stdout, stderr, err := NewCapture(filepath.Join(wintest.TempDir(t), "serve.log"), 64<<10, matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	said := filepath.Join(wintest.TempDir(t), "said")
	cmd := serveHelper(t, "escaped", "LOGSCAN_SAID="+said)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	stdout.Close()
	stderr.Close()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(said); err == nil {
			break
		}
	}
	done := make(chan struct{})
	var got Captured
	go func() {
		defer close(done)
		got, err = c.Wait(100 * time.Millisecond)
	}()
	select {
	case <-done:
	case <-exited:
		<-done
		t.Fatal("Wait(100ms) returned only when the serve's process ended 30 s later: the read waiting on its pipe was not ended")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got.Route.Fast == nil {
		t.Errorf("Route.Fast = nil, want the line written before Wait gave up")
	}
}
