#!/bin/sh
# npu-hold too: SIGKILL to its process group (kill -9 -PGID) kills npu-hold and
# its supervisor (same group) together; the command's helper in a session of
# its own (that closed the ticket's descriptors, as Python's subprocess does)
# keeps running and the ticket is free. Exits 1 when the bug reproduces.
. "$(dirname "$0")/common.sh"
setsid "$T/npu-hold" -- python3 -c 'import subprocess, sys, time
subprocess.Popen(["helper of " + sys.argv[1], "600"], executable="sleep", start_new_session=True)
time.sleep(600)' "$MARK" >"$T/hold.out" 2>&1 &
sleep 2
pg=$(pgrep -f "npu-hold -- python3" | while read p; do grep -q "$MARK" /proc/$p/cmdline 2>/dev/null && ps -o pgid= -p $p; done | head -1 | tr -d ' ')
[ -n "$pg" ] || { echo "npu-hold not found"; exit 2; }
kill -KILL -$pg
sleep 3
left=$(alive)
free=no; "$T/npu-hold" --wait 1s -- true 2>/dev/null && free=yes
echo "  alive 3 s after the group's SIGKILL: $(echo $left); ticket free: $free"
[ -n "$left" ] && { echo "BUG: the command's tree outlived npu-hold"; exit 1; }
echo held; exit 0
