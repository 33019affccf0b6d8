#!/bin/sh
# SIGKILL to the gate's whole process group mid-stream (kill -9 -PGID: what a
# terminal's job control, a CI runner killing a job's group, or `kill -9 -$pgid`
# does). The supervisor is in the gate's own process group, so it dies with
# the gate and stops nothing; the serve dies of its parent-death signal, but
# its helpers (start_new_session=True, sleep 600) are left running under init,
# and the device's ticket is free at once.
# CONTAIN=auto (default), cgroup2, freezer or descendants. Exits 1 when the
# bug reproduces.
. "$(dirname "$0")/common.sh"
export NPU_SERVE_SMOKE_CONTAIN=${CONTAIN:-auto}
setsid "$T/npu-serve-smoke" run --serve "python3 $T/serve.py {port} helpers $MARK $T" --replies 1 --warmup 0 \
	--max-tokens 8 --floor 1 --first-token-ms 60000 --hold builtin --request-timeout 10m --out "$T/out" >"$T/gate.out" 2>&1 &
G=$!
KILL_PIDS=$G
i=0; while [ ! -e "$T/streaming" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
[ -e "$T/streaming" ] || { echo "the serve never streamed"; cat "$T/gate.out"; exit 2; }
sup=$(pgrep -f "supervise.*$MARK")
echo "  gate pid $G pgid $(ps -o pgid= -p $G | tr -d ' '); supervisor $sup pgid $(ps -o pgid= -p $sup | tr -d ' ')"
pg=$(ps -o pgid= -p $G | tr -d ' ')
kill -KILL -$pg
wait $G 2>/dev/null
sleep 3
left=$(alive)
free=no; "$T/npu-hold" --wait 1s -- true 2>/dev/null && free=yes
echo "  alive 3 s after the group's SIGKILL: $(echo $left)"
echo "  ticket free while they run: $free"
if [ -n "$left" ]; then
	for p in $left; do echo "    $p $(tr '\0' ' ' </proc/$p/cmdline | cut -c1-60)"; done
	echo "BUG: the serve's tree outlived the gate"; exit 1
fi
echo "held"; exit 0
