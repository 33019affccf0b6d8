// Package runnerenv holds the tests that build, as root, each environment a
// runner lives in (an unprivileged user with or without a delegated cgroup,
// a pure cgroup v2 host and a hybrid one, a container-like PID namespace, a
// missing lock directory, a read-only HOME, /proc mounted hidepid=2, a
// device node the user may not open) and run the gate and npu-hold there
// as that user.
//
// Every test that needs root is named TestRoot...; run as an ordinary user
// it skips, saying so. .ci/run runs them as root.
package runnerenv
