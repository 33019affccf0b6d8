package probe

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// The transport adds nothing to what it measures.
//
// A serve that leaves Nagle's algorithm on (Python's http.server and
// socketserver, Flask's development server) holds each small write until the
// one before it is acknowledged, and Linux delays an acknowledgement up to
// 40 ms: each token then waits for the last one's ACK. The probe's socket
// acknowledges at once instead (tuneSocket and ackNow: on Linux
// TCP_QUICKACK, which the kernel clears as it goes, so it is set again before
// every read; on Windows, whose delayed acknowledgement waits up to 200 ms,
// an acknowledgement frequency of 1), sends with TCP_NODELAY, asks
// for no compression, and opens a connection for each request: a kept-alive
// connection may be one the serve has just closed, and a request sent on it
// fails with EOF.

// dialTimeout bounds the connection to a serve on this machine.
const dialTimeout = 10 * time.Second

// connStats is what one request's connection saw: the bytes read, and how
// many times a read found nothing waiting and had to wait for the network.
type connStats struct {
	bytes    atomic.Int64
	arrivals atomic.Int64
	conn     atomic.Pointer[quickConn]
}

type statsKey struct{}

func withStats(ctx context.Context, s *connStats) context.Context {
	return context.WithValue(ctx, statsKey{}, s)
}

// newTransport is the probe's HTTP transport: a new connection a request,
// acknowledging every segment at once.
func newTransport() *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = tuneSocket(fd) }); err != nil {
			return err
		}
		return serr
	}}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc, ok := c.(*net.TCPConn)
			if !ok {
				return c, nil
			}
			rc, err := tc.SyscallConn()
			if err != nil {
				return c, nil
			}
			qc := &quickConn{TCPConn: tc, raw: rc}
			if s, ok := ctx.Value(statsKey{}).(*connStats); ok {
				qc.stats = s
				s.conn.Store(qc)
			}
			return qc, nil
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		ResponseHeaderTimeout:  0, // the request's own timeout bounds it
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// quickConn asks for an acknowledgement at once before every read (ackNow),
// and counts what it reads.
type quickConn struct {
	*net.TCPConn
	raw   syscall.RawConn
	stats *connStats
}

func (c *quickConn) Read(p []byte) (int, error) {
	waiting := -1
	c.raw.Control(func(fd uintptr) {
		ackNow(fd)
		if c.stats != nil {
			waiting = bytesWaiting(fd)
		}
	})
	if c.stats != nil && waiting == 0 {
		// Nothing was there: what this read gets came off the network
		// after the last one, a new arrival.
		c.stats.arrivals.Add(1)
	}
	n, err := c.TCPConn.Read(p)
	if c.stats != nil {
		c.stats.bytes.Add(int64(n))
	}
	return n, err
}
