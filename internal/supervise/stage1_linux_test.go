package supervise

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/stage1"
)

// TestStage1FindsTheSupervisorsCgroup holds the first stage's reading of
// /proc/self/cgroup and /proc/self/mountinfo to the supervisor's: where it
// finds a cgroup, it is the one newCgroup2 would make the serve's below.
func TestStage1FindsTheSupervisorsCgroup(t *testing.T) {
	const (
		hybridCgroup = "9:name=systemd:/\n6:freezer:/\n1:cpu:/\n0::/\n"
		hybridMounts = "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
			"36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n" +
			"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
		pureMounts = "25 21 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
		runner     = "0::/system.slice/actions.runner.org-repo.npu-1.service\n"
	)
	for _, tc := range []struct {
		name, cgroup, mounts string
		want                 string // "" where the first stage declines
	}{
		{"hybrid", hybridCgroup, hybridMounts, "/sys/fs/cgroup/unified"},
		{"pure v2, a runner's service", runner, pureMounts, "/sys/fs/cgroup/system.slice/actions.runner.org-repo.npu-1.service"},
		{"no trailing newline", strings.TrimSuffix(runner, "\n"), strings.TrimSuffix(pureMounts, "\n"), "/sys/fs/cgroup/system.slice/actions.runner.org-repo.npu-1.service"},
		{"the first cgroup2 mount", runner, pureMounts + "99 25 0:40 / /mnt/other rw - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/system.slice/actions.runner.org-repo.npu-1.service"},
		{"a space in a name", "0::/a b/c\n", pureMounts, "/sys/fs/cgroup/a b/c"},
		// Where only the supervisor reads it right, or no cgroup v2 is.
		{"v1 only", "6:freezer:/\n1:cpu:/\n", hybridMounts, ""},
		{"not mounted", runner, "30 22 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", ""},
		{"read-only", runner, "25 21 0:22 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n", ""},
		{"a subtree", "0::/docker/abc/job\n", "25 21 0:22 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", ""},
		{"an escaped mount point", runner, `25 21 0:22 / /mnt/with\040space rw - cgroup2 cgroup2 rw` + "\n", ""},
		{"outside the namespace", "0::/../sibling\n", pureMounts, ""},
		{"a space at the end", "0::/a \n", pureMounts, ""},
		{"empty", "", "", ""},
	} {
		got, why := stage1.CgroupParent(tc.cgroup, tc.mounts)
		if got != tc.want || (got == "") != (why != "") {
			t.Errorf("%s: CgroupParent = %q, %q; want %q", tc.name, got, why, tc.want)
			continue
		}
		if got == "" {
			continue
		}
		rel, err := ownCgroupIn([]byte(tc.cgroup), func(c string) bool { return c == "" }, "0")
		if err != nil {
			t.Errorf("%s: the supervisor's reading: %v", tc.name, err)
			continue
		}
		mnt, root, err := cgroupMountIn(strings.NewReader(tc.mounts), func(fstype, _ string) bool { return fstype == "cgroup2" })
		if err != nil {
			t.Errorf("%s: the supervisor's reading: %v", tc.name, err)
			continue
		}
		if full := under(mnt, root, rel); full != got {
			t.Errorf("%s: CgroupParent = %q, the supervisor's %q", tc.name, got, full)
		}
	}
}

// TestStage1StartedLineIsJSONs: the first stage's Started event is, to the
// byte, what the supervisor's encoding writes.
func TestStage1StartedLineIsJSONs(t *testing.T) {
	for _, dir := range []string{"/sys/fs/cgroup/unified/npu-serve-smoke-7", "/sys/fs/cgroup/a b/x.service/npu-serve-smoke-4194304", "/"} {
		b, err := json.Marshal(Event{Kind: Started, PID: 4194304, StartedNS: 1764662400123456789, Contain: "cgroup2", Cgroup: dir, Early: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(stage1.StartedLine(4194304, 1764662400123456789, dir)), string(b)+"\n"; got != want {
			t.Errorf("StartedLine(%q) = %s, want %s", dir, got, want)
		}
	}
	// JSONSafe is exactly the bytes encoding/json writes as they are.
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		b, _ := json.Marshal(s)
		if asIs := string(b) == `"`+s+`"`; stage1.JSONSafe(s) != asIs {
			t.Errorf("JSONSafe(%q) = %v; encoding/json writes it as %s", s, stage1.JSONSafe(s), b)
		}
	}
}
