#!/bin/sh
# ATTACK: status and the grant disagree. A live (flocked) holding file whose
# facts name another device is shown by status as npu's holder (with the
# file's claimed user/pid, not its owner/locker), yet a run is granted npu.
# Expected: status "npu: held" => a run waits (exit 75 at --wait 1s).
# Observed: 'npu: held by x (pid 1, "c")' then 'npu-hold: npu held (ticket 2)', 'ran', exit 0.
# usage: attack/status_lies.sh /path/to/npu-hold   (exit 1 = finding reproduced)
B=${1:-/tmp/ah/npu-hold}; T=$(mktemp -d); mkdir -m 1777 $T/locks; export NPU_HOLD_DIR=$T/locks HOME=$T
echo '{"ticket":1,"device":"npu","user":"x","pid":1,"command":"c","devices":["other"]}' > $T/locks/npu.h.00000000000000000001
flock -x $T/locks/npu.h.00000000000000000001 sleep 20 & A=$!; sleep 0.5
$B status
timeout -s KILL 10 $B --wait 1s -- echo ran; rc=$?
kill $A; wait $A 2>/dev/null; rm -rf $T
echo "run exit $rc (expected 75)"; [ $rc = 75 ]
