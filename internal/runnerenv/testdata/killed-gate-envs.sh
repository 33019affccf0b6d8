#!/bin/sh
# killed-gate-envs.sh: internal/serve's KilledGate benchmark in each
# environment a runner lives in, built the way internal/runnerenv's tests
# build them. Run as root from the module's root:
#
#   sh internal/runnerenv/testdata/killed-gate-envs.sh [BENCHTIME]
#
# Each line of output is one environment and the benchmark's lines for each
# mechanism it offers there (median-free-ms, worst-free-ms, survivors).
set -eu
benchtime=${1:-10x}
[ "$(id -u)" = 0 ] || { echo "killed-gate-envs.sh: needs root to build the environments" >&2; exit 2; }
uid=65534
work=$(mktemp -d /tmp/killed-gate-envs.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/serve.test" ./internal/serve
home=$work/home
mkdir "$home" && chown $uid:$uid "$home"
unified=/sys/fs/cgroup/unified
cg=killed-gate-envs-$$
user="setpriv --reuid=$uid --regid=$uid --clear-groups"
bench="env -i HOME=$home TMPDIR=$home PATH=/usr/bin:/bin $work/serve.test -test.run ^\$ -test.bench KilledGate -test.benchtime $benchtime"
pure="umount -R /sys/fs/cgroup; mount -t cgroup2 cgroup2 /sys/fs/cgroup"
container="mount -t tmpfs tmpfs /run; for m in \$(awk '\$5 ~ \"^/sys/fs/cgroup\" {print \$5}' /proc/self/mountinfo); do mount -o remount,bind,ro \"\$m\"; done"

delegate() {
	mkdir "$unified/$cg"
	chown $uid:$uid "$unified/$cg" "$unified/$cg/cgroup.procs" "$unified/$cg/cgroup.threads" "$unified/$cg/cgroup.subtree_control"
}
undelegate() {
	for d in "$unified/$cg"/npu-serve-smoke-* "$unified/$cg"; do [ -d "$d" ] && rmdir "$d"; done
	return 0
}

one() { # NAME UNSHARE-FLAGS SETUP AS
	echo "== $1"
	unshare $2 sh -c "$3; exec $4 $bench" | grep '^BenchmarkKilledGate' || echo "(no mechanism ran)"
}

one "hybrid, root" "-m --propagation private" "true" ""
one "hybrid, user, no cgroup of its own" "-m --propagation private" "true" "$user"
delegate
one "hybrid, user, delegated cgroup v2" "-m --propagation private" "echo \$\$ > $unified/$cg/cgroup.procs" "$user"
undelegate
one "pure v2, root" "-m --propagation private" "$pure" ""
one "pure v2, user, no cgroup of its own" "-m --propagation private" "$pure" "$user"
delegate
one "pure v2, user, delegated" "-m --propagation private" "$pure; echo \$\$ > /sys/fs/cgroup/$cg/cgroup.procs" "$user"
undelegate
one "container-like (PID ns, ro cgroups, own /run), user" "--pid --fork --mount-proc -m --propagation private" "$container" "$user"
