#!/bin/sh
# A serve that kills its own supervisor (its parent: os.getppid()) after a
# child of it detached (double fork + setsid). The daemon had come back to the
# supervisor (the subreaper); with the supervisor gone it is reparented to
# init, and the gate neither kills it nor counts it: result.json says
# "survivors": 0 while it runs, and the device's ticket is free.
# CONTAIN=descendants (default; no privilege needed) or CONTAIN=cgroup2 /
# freezer with MODE=killsup_rootcg (root: the daemon moves to the root cgroup).
# Exits 1 when the bug reproduces.
. "$(dirname "$0")/common.sh"
export NPU_SERVE_SMOKE_CONTAIN=${CONTAIN:-descendants}
gate "${MODE:-killsup}" out >"$T/gate.out" 2>&1
sleep 1
left=$(alive)
free=no; "$T/npu-hold" --wait 1s -- true 2>/dev/null && free=yes
sed -n 's/^serve: stop/  gate: serve: stop/p' "$T/gate.out"
echo "  result.json: $(grep -E '"(survivors|swept|contain)"' "$T/out/result.json" | tr -d ' \n')"
echo "  alive after the gate returned: $(echo $left)"
echo "  ticket free while they run: $free"
if [ -n "$left" ]; then
	for p in $left; do echo "    $p $(tr '\0\n' '  ' </proc/$p/cmdline | sed 's/.*daemon/daemon/' | cut -c1-60)"; done
	echo "BUG: the serve's tree outlived the gate"; exit 1
fi
echo "held"; exit 0
