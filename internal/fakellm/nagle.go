package fakellm

import "net"

// NagleListener leaves Nagle's algorithm on for every connection it accepts
// (TCP_NODELAY off), as Python's http.server and socketserver and Flask's
// development server do: a small write then waits for the one before it to
// be acknowledged. With Options.Nagle the serve also writes as they do:
// headers, the role chunk and each token in writes of their own.
func NagleListener(l net.Listener) net.Listener { return nagleListener{l} }

type nagleListener struct{ net.Listener }

func (l nagleListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(false); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}
