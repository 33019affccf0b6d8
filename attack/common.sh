# Shared by the attack_*.sh scripts: builds the gate, writes a small Python
# serve (answers /health and a streamed /v1/chat/completions at once), makes
# a lock directory of its own, and cleans up by pid on exit.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/attack.XXXXXX)
chmod 755 "$T"
mkdir -m 1777 "$T/hold"
export NPU_HOLD_DIR="$T/hold"
MARK="attack-$$-$(date +%s%N)"
KILL_PIDS=""
cleanup() {
	for p in $KILL_PIDS $(pgrep -f "$MARK" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 3' INT TERM
(cd "$ROOT" && go build -o "$T/npu-serve-smoke" ./cmd/action && go build -o "$T/npu-hold" ./cmd/npu-hold) || exit 2
cat > "$T/serve.py" <<'PY'
import http.server, json, os, sys, subprocess, time, signal
port, mode, marker, tmp = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
DAEMON = """
import os, sys, time, signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
while True: time.sleep(1)
"""
if mode in ("killsup", "killsup_rootcg"):
    # a detached daemon (double fork + setsid; it comes back to the
    # supervisor, the subreaper), then the serve kills its supervisor.
    # killsup_rootcg: the daemon first moves itself to the root cgroup of
    # every hierarchy (root may; so may a user into any cgroup of a
    # delegated subtree).
    code = DAEMON
    if mode == "killsup_rootcg":
        code = DAEMON.replace("while True", "import glob\nfor p in glob.glob('/sys/fs/cgroup/*/cgroup.procs') + ['/sys/fs/cgroup/cgroup.procs']:\n    try: open(p, 'w').write(str(os.getpid()))\n    except OSError: pass\nwhile True")
    subprocess.Popen([sys.executable, "-c", code, "daemon of " + marker])
    time.sleep(0.5)
    os.kill(os.getppid(), signal.SIGKILL)
if mode == "helpers":
    for i in range(3):
        subprocess.Popen(["helper of " + marker, "600"], executable="sleep", start_new_session=True)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        b = b'{"status":"ok"}'
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if mode == "helpers":
            open(tmp + "/streaming", "w").close()
            time.sleep(600)
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.send_header("Connection", "close"); self.end_headers()
        for i in range(8):
            d = {"choices": [{"index": 0, "delta": {"content": "word%d " % i}, "finish_reason": None}]}
            self.wfile.write(b"data: " + json.dumps(d).encode() + b"\n\n"); self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n"); self.wfile.flush()
        self.close_connection = True
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
gate() { # gate MODE OUT [args...]
	m=$1 o=$2; shift 2
	"$T/npu-serve-smoke" run --serve "python3 $T/serve.py {port} $m $MARK $T" --replies 1 --warmup 0 \
		--max-tokens 8 --floor 1 --first-token-ms 60000 --hold builtin --out "$T/$o" "$@"
}
alive() { pgrep -f "$MARK" | grep -v "^$$\$"; }
