package probe

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkConnRead is what the transport adds to each read: TCP_QUICKACK
// set again and the bytes waiting asked for (two system calls), against a
// plain connection, reading 200-byte writes (a chunk of one token) over
// loopback.
//
//	go test -run '^$' -bench ConnRead ./internal/probe
func BenchmarkConnRead(b *testing.B) {
	for _, quick := range []bool{false, true} {
		name := "plain"
		if quick {
			name = "quickack"
		}
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				msg := make([]byte, 200)
				for {
					if _, err := c.Write(msg); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var r io.Reader = c
			if quick {
				tc := c.(*net.TCPConn)
				rc, _ := tc.SyscallConn()
				r = &quickConn{TCPConn: tc, raw: rc, stats: &connStats{}}
			}
			buf := make([]byte, 200)
			for b.Loop() {
				if _, err := io.ReadFull(r, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQuickConnCounts: lines written together are one arrival; a line
// written while the reader waits is the next. The writer waits before the
// second write so that the reader is waiting by then; on a loaded machine it
// may not be, so longer waits are tried before the test fails.
func TestQuickConnCounts(t *testing.T) {
	var last string
	for _, wait := range []time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 500 * time.Millisecond} {
		got, bytes := arrivals(t, wait)
		if got[0] != got[1] {
			t.Fatalf("arrivals at each line = %v: two lines in one write must be one arrival", got)
		}
		if got[2] == got[1]+1 && bytes == 14 {
			return
		}
		last = fmt.Sprintf("arrivals at each line = %v, bytes %d", got, bytes)
	}
	t.Errorf("%s; want the third line, written while the reader waited, the next arrival, and 14 bytes", last)
}

func arrivals(t *testing.T, wait time.Duration) ([]int64, int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	next := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("one\ntwo\n")) // one write
		<-next
		time.Sleep(wait)
		c.Write([]byte("three\n"))
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	rc, _ := tc.SyscallConn()
	s := &connStats{}
	lines := newLineReader(&quickConn{TCPConn: tc, raw: rc, stats: s})
	var got []int64
	for i := 0; i < 3; i++ {
		if i == 2 {
			close(next)
		}
		if _, err := lines.next(); err != nil {
			t.Fatal(err)
		}
		got = append(got, s.arrivals.Load())
	}
	return got, s.bytes.Load()
}
