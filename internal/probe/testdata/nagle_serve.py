#!/usr/bin/env python3
"""A chat serve as NPU vendors' Python demo serves are written: the standard
library's http.server, Nagle's algorithm left on (no TCP_NODELAY), HTTP/1.0,
and one small unbuffered write for the headers, the role chunk and each token.
HTTP/1.1 with chunks framed by hand and connections kept alive (--http 1.0:
one response a connection, ended by closing it).

It streams an OpenAI-style chat completion at a steady --rate after
--first-token-ms, spent before the response starts (the prompt first), so
the headers, the role chunk and the first token are three writes in a row. Modes: steady (the default), burst (every token held and
written at once at the end, as a buffering proxy does), lie (usage claims
1000 completion tokens).

Prints "listening on PORT" once it accepts connections. Standard library only.
"""
import argparse
import http.server
import json
import socketserver
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    # wbufsize 0 (the default): every wfile.write is a send of its own.

    def log_message(self, fmt, *args):
        sys.stderr.write("serve: " + (fmt % args) + "\n")
        sys.stderr.flush()

    def do_GET(self):
        if self.path != "/health":
            self.send_error(404)
            return
        body = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(length) or b"{}")
        n = int(req.get("max_tokens") or 16)
        opt = self.server.opt
        begin = time.monotonic()
        first = begin + opt.first_token_ms / 1000.0
        if not opt.headers_first:
            # The prompt first: the response starts with the first token.
            time.sleep(max(0.0, first - time.monotonic()))

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        chunked = self.protocol_version == "HTTP/1.1"
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()  # the headers: one write

        def write(b):
            if chunked:
                b = b"%x\r\n%s\r\n" % (len(b), b)
            self.wfile.write(b)

        def chunk(delta, finish=None, **extra):
            c = {"id": "chatcmpl-py", "object": "chat.completion.chunk", "model": "py",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            c.update(extra)
            return ("data: " + json.dumps(c) + "\n\n").encode()

        write(chunk({"role": "assistant", "content": None}))
        held = []
        for i in range(n):
            due = first + (i / opt.rate if opt.rate > 0 else 0)
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            data = chunk({"content": (" " if i else "") + "word%d" % i})
            if opt.mode == "burst":
                held.append(data)
            else:
                write(data)
        if held:
            write(b"".join(held))
        write(chunk({}, "length"))
        claimed = 1000 if opt.mode == "lie" else n
        usage = {"id": "chatcmpl-py", "object": "chat.completion.chunk", "model": "py", "choices": [],
                 "usage": {"prompt_tokens": 20, "completion_tokens": claimed, "total_tokens": 20 + claimed}}
        write(("data: " + json.dumps(usage) + "\n\n").encode())
        write(b"data: [DONE]\n\n")
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--rate", type=float, default=100.0, help="tokens a second; 0: no pacing")
    ap.add_argument("--first-token-ms", type=float, default=300.0)
    ap.add_argument("--mode", choices=["steady", "burst", "lie"], default="steady")
    ap.add_argument("--http", choices=["1.0", "1.1"], default="1.1")
    ap.add_argument("--headers-first", action="store_true",
                    help="send the headers and role chunk at once, before the first token's delay")
    opt = ap.parse_args()
    Handler.protocol_version = "HTTP/" + opt.http
    srv = Server(("127.0.0.1", opt.port), Handler)
    srv.opt = opt
    print("listening on %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
