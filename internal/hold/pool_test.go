//go:build unix

// Unix only: the pools' contenders start children holding the ticket's
// descriptors and read /proc/self/fd; the pool's grant is the queue's,
// which hold_test.go's contenders run under Windows too.

package hold

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

const notDevice = "not a device variable; name the vendor's variable that makes devices visible (ASCEND_RT_VISIBLE_DEVICES, ZE_AFFINITY_MASK, CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, or a NAME_VISIBLE_DEVICES, NAME_DEVICES or NAME_AFFINITY_MASK)"

func TestParsePools(t *testing.T) {
	ps, err := ParsePools("pools", strings.NewReader("# the host's NPUs\nnpu env=ASCEND_RT_VISIBLE_DEVICES npu0 npu1 npu2=7  # four\n\ncann CANN0=0 CANN1=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Pool{Name: "npu", Env: "ASCEND_RT_VISIBLE_DEVICES", Where: "pools:2", Members: []Member{{"npu0", "0"}, {"npu1", "1"}, {"npu2", "7"}}}
	if diff := cmp.Diff(want, ps.Pool("npu")); diff != "" {
		t.Errorf("ParsePools() pool npu (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"cann", "npu"}, ps.Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		text string
		want string
	}{
		{"npu npu0 npu1 npu0", "pools:1: device npu0 is named twice in pool npu: name each device once"},
		{"npu npu0 npu1\nmore npu1", "pools:2: device npu1 is named twice (also in pool npu at pools:1): a device belongs to one pool, once"},
		{"npu npu0\nnpu npu1", "pools:2: pool npu is declared twice (also at pools:1); keep one line for it"},
		{"npu", "pools:1: pool npu has no devices: list them after its name, e.g. 'npu npu0 npu1'"},
		{"npu a=1 b=1", "pools:1: devices a and b have the same index 1: give each its own"},
		{"npu env=1X a", "pools:1: env=1X: %[1]s"},
		{"npu env=PATH a", "pools:1: env=PATH: %[1]s"},
		{"npu env=LD_PRELOAD a", "pools:1: env=LD_PRELOAD: %[1]s"},
		{"npu env=LD_VISIBLE_DEVICES a", "pools:1: env=LD_VISIBLE_DEVICES: %[1]s"},
		{"npu env=http_proxy a", "pools:1: env=http_proxy: %[1]s"},
		{"npu env=NPU_HOLD_DEVICES a", "pools:1: env=NPU_HOLD_DEVICES: npu-hold sets it to the devices' names itself; name the vendor's variable, e.g. ASCEND_RT_VISIBLE_DEVICES"},
		{"npu a/b", `pools:1: device "a/b": write NAME or NAME=INDEX (letters, digits, '.', '_' and '-'; the index without commas)`},
		{"npu a b\na npu9", "pools:2: a is both a pool and a device of pool npu (pools:1): name them apart"},
		{"npu.h.00000000000000000001 a", `pools:1: pool "npu.h.00000000000000000001": a device name may not hold ".h.": ticket files are named DEVICE.q.N and DEVICE.h.N, so its tickets would read as those of "npu"; rename it, e.g. npu-h-00000000000000000001`},
		{"npu npu0 npu.q.7", `pools:1: device "npu.q.7": a device name may not hold ".q.": ticket files are named DEVICE.q.N and DEVICE.h.N, so its tickets would read as those of "npu"; rename it, e.g. npu-q-7`},
		{"npu npu0 npu0\nx npu0", "pools:1: device npu0 is named twice in pool npu: name each device once\npools:2: device npu0 is named twice (also in pool npu at pools:1): a device belongs to one pool, once"},
	} {
		_, err := ParsePools("pools", strings.NewReader(tt.text))
		if strings.Contains(tt.want, "%[1]s") {
			tt.want = fmt.Sprintf(tt.want, notDevice)
		}
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParsePools(%q) = %v, want %q", tt.text, err, tt.want)
		}
	}
	for _, v := range []string{"ASCEND_RT_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ROCR_VISIBLE_DEVICES", "ACME_NPU_VISIBLE_DEVICES", "ACME_DEVICES", "ACME_AFFINITY_MASK"} {
		text := "npu env=" + v + " a b"
		if ps, err := ParsePools("pools", strings.NewReader(text)); err != nil || ps.Pool("npu").Env != v {
			t.Errorf("ParsePools(%q) = %v, want pool npu with env %s", text, err, v)
		}
	}
}

func TestResolve(t *testing.T) {
	ps, _ := ParsePools("/etc/npu-hold/pools", strings.NewReader("npu npu0 npu1 npu2 npu3\n"))
	for _, tt := range []struct {
		name  string
		count int
		pool  string
		err   string
	}{
		{"npu", 2, "npu", ""},
		{"npu", 4, "npu", ""},
		{"other", 1, "", ""},
		{"npu", 5, "", "--count 5: pool npu has 4 devices (/etc/npu-hold/pools:1); ask for at most 4, or declare more there"},
		{"npu", 0, "", "--count 0: ask for 1 device or more"},
		{"npu", -1, "", "--count -1: ask for 1 device or more"},
		{"npu2", 1, "", "device npu2 belongs to pool npu (/etc/npu-hold/pools:1), whose queue hands it out: ask for the pool (--device npu, with a count)"},
		{"other", 2, "", "--count 2: other is one device, not a pool declared in /etc/npu-hold/pools; declare it there, e.g. 'other other0 other1' (docs/runner.md)"},
	} {
		p, err := ps.Resolve(tt.name, tt.count, "--count")
		got, gotErr := "", ""
		if p != nil {
			got = p.Name
		}
		if err != nil {
			gotErr = err.Error()
		}
		if got != tt.pool || gotErr != tt.err {
			t.Errorf("Resolve(%q, %d) = %q, %q; want %q, %q", tt.name, tt.count, got, gotErr, tt.pool, tt.err)
		}
	}
}

func TestTicketEnv(t *testing.T) {
	d := &Device{Name: "npu", Pool: &Pool{Name: "npu", Env: "ASCEND_RT_VISIBLE_DEVICES"}}
	tk := &Ticket{d: d, Devices: []Member{{"npu10", "10"}, {"npu2", "2"}}}
	want := []string{"NPU_HOLD_DEVICES=npu10,npu2", "ASCEND_RT_VISIBLE_DEVICES=2,10"}
	if diff := cmp.Diff(want, tk.Env()); diff != "" {
		t.Errorf("Env() (-want +got):\n%s", diff)
	}
	one := &Ticket{d: &Device{Name: "npu"}, Devices: []Member{{Name: "npu"}}}
	if diff := cmp.Diff([]string{"NPU_HOLD_DEVICES=npu"}, one.Env()); diff != "" {
		t.Errorf("Env() of one device (-want +got):\n%s", diff)
	}
}

// Ten contenders (processes) ask a pool of four for one or two devices: no
// device is held by two at once, grants follow arrival, every device is
// used.
func TestPoolContenders(t *testing.T) {
	e := newEnv(t)
	devices := []string{"npu0", "npu1", "npu2", "npu3"}
	counts := []int{2, 1, 2, 1, 1, 2, 2, 1, 2, 1}
	pool := &Pool{Name: "npu"}
	for _, m := range devices {
		pool.Members = append(pool.Members, Member{Name: m})
	}
	// One holds the whole pool while the others queue, so they contend.
	blocker, _ := e.start(t, "x", "HOLD_FOR=10m", "HOLD_POOL="+strings.Join(devices, ","), "HOLD_COUNT=4")
	eventually(t, "the blocker holds", func() bool { return strings.Contains(readFile(e.record), "x start") })
	var cmds []*exec.Cmd
	for i, n := range counts {
		cmd, _ := e.start(t, strconv.Itoa(i), "HOLD_FOR=40ms", "HOLD_POOL="+strings.Join(devices, ","), "HOLD_COUNT="+strconv.Itoa(n))
		cmds = append(cmds, cmd)
		eventually(t, fmt.Sprintf("contender %d in the queue", i), func() bool {
			st, err := (&Device{Dir: e.dir, Name: "npu", Pool: pool}).Status()
			if err != nil {
				return false
			}
			tickets := map[uint64]bool{}
			for _, d := range st.Devices {
				if d.Holder != nil {
					tickets[d.Holder.Ticket] = true
				}
			}
			return len(st.Queue)+len(tickets) >= i+2
		})
	}
	blocker.Process.Kill()
	blocker.Wait()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("contender %d: %v", i, err)
		}
	}
	evs := events(t, e.record)
	starts := map[string]event{}
	var order []event
	for _, ev := range evs {
		if ev.what == "start" && ev.id != "x" {
			starts[ev.id] = ev
			order = append(order, ev)
		}
	}
	slices.SortFunc(order, func(a, b event) int { return int(a.at - b.at) })
	var ids []string
	for _, ev := range order {
		ids = append(ids, ev.id)
	}
	if diff := cmp.Diff([]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, ids); diff != "" {
		t.Errorf("grants in time order (-arrival +got):\n%s", diff)
	}
	type interval struct {
		id       string
		from, to int64
	}
	per := map[string][]interval{}
	for _, ev := range evs {
		if ev.what != "end" {
			continue
		}
		s := starts[ev.id]
		i, _ := strconv.Atoi(ev.id)
		if len(s.devices) != counts[i] {
			t.Errorf("contender %s held %v, want %d devices", ev.id, s.devices, counts[i])
		}
		for _, d := range s.devices {
			per[d] = append(per[d], interval{ev.id, s.at, ev.at})
		}
	}
	for _, d := range devices {
		iv := per[d]
		if len(iv) == 0 {
			t.Errorf("%s was never used", d)
		}
		slices.SortFunc(iv, func(a, b interval) int { return int(a.from - b.from) })
		for k := 1; k < len(iv); k++ {
			if iv[k].from < iv[k-1].to {
				t.Errorf("%s held by contenders %s and %s at once", d, iv[k-1].id, iv[k].id)
			}
		}
	}
}

// BenchmarkPoolHandOver is the time from the event that allowed a grant to
// the grant, over b.N grants of one or two devices of a pool of four,
// between contenders that each open the files on their own: the median and
// the worst. The event is the latest release (devices freed) or grant (the
// queue moved on) before it.
func BenchmarkPoolHandOver(b *testing.B) {
	dir := b.TempDir()
	pool := &Pool{Name: "npu"}
	for i := range 4 {
		pool.Members = append(pool.Members, Member{Name: fmt.Sprintf("npu%d", i), Index: strconv.Itoa(i)})
	}
	n := max(b.N, 2)
	released := make([]time.Time, n)
	acquired := make([]time.Time, n)
	first, err := (&Device{Dir: dir, Name: "npu", Pool: pool, Count: 4}).Acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := (&Device{Dir: dir, Name: "npu", Pool: pool, Count: 1 + i%2}).Acquire(context.Background())
			if err != nil {
				b.Error(err)
				return
			}
			acquired[i] = time.Now()
			time.Sleep(time.Millisecond)
			released[i] = time.Now()
			t.Release()
		}()
	}
	for d := (&Device{Dir: dir, Name: "npu", Pool: pool}); ; time.Sleep(time.Millisecond) {
		if st, _ := d.Status(); st != nil && len(st.Queue) == n-1 {
			break
		}
	}
	released[0] = time.Now()
	first.Release()
	wg.Wait()
	b.StopTimer()
	var gaps []float64
	for i := 1; i < n; i++ {
		var last time.Time
		for j := range n {
			for _, at := range []time.Time{released[j], acquired[j]} {
				if j != i && at.Before(acquired[i]) && at.After(last) {
					last = at
				}
			}
		}
		gaps = append(gaps, float64(acquired[i].Sub(last).Microseconds())/1000)
	}
	slices.Sort(gaps)
	b.ReportMetric(gaps[len(gaps)/2], "median-ms")
	b.ReportMetric(gaps[len(gaps)-1], "worst-ms")
}

// A request for one device does not pass a request for two ahead of it,
// even with a device free: the larger request is never starved.
func TestPoolQueueIsStrict(t *testing.T) {
	dir := t.TempDir()
	pool := &Pool{Name: "npu", Members: []Member{{"npu0", "0"}, {"npu1", "1"}, {"npu2", "2"}, {"npu3", "3"}}}
	dev := func(count int) *Device { return &Device{Dir: dir, Name: "npu", Pool: pool, Count: count} }
	three, err := dev(3).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"npu0", "npu1", "npu2"}, three.Names()); diff != "" {
		t.Errorf("Acquire(3) devices (-want +got):\n%s", diff)
	}
	two := make(chan *Ticket, 1)
	go func() {
		tk, err := dev(2).Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		two <- tk
	}()
	eventually(t, "the request for two queued", func() bool {
		st, _ := dev(1).Status()
		return st != nil && len(st.Queue) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if tk, err := dev(1).Acquire(ctx); err == nil {
		t.Errorf("Acquire(1) = %v, passing the request for two ahead of it", tk.Names())
		tk.Release()
	}
	three.Release()
	tk := <-two
	if diff := cmp.Diff([]string{"npu0", "npu1"}, tk.Names()); diff != "" {
		t.Errorf("Acquire(2) devices after the release (-want +got):\n%s", diff)
	}
	tk.Release()
}

// TestLoadPoolsNotRegular: a pools file that is a FIFO (whose open for
// reading would wait for a writer for ever) or a directory is refused at
// once, naming it; one that does not exist declares no pools.
func TestLoadPoolsNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pools")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo: "the pools file " + fifo + " is not a regular file (a p---------)",
		dir:  "the pools file " + dir + " is not a regular file (a d---------)",
	} {
		if ps, err := LoadPools(path); err == nil || err.Error() != want+"; make it a file of one pool a line (docs/runner.md)" {
			t.Errorf("LoadPools(%s) = %v, %v; want %q", path, ps, err, want)
		}
	}
	if ps, err := LoadPools(filepath.Join(dir, "none")); err != nil || len(ps.Names()) != 0 {
		t.Errorf("LoadPools(a file that does not exist) = %v, %v; want no pools", ps, err)
	}
}

// TestPoolNeverHeldTwice: contenders for one or two devices of a pool of
// two, many at once, some killed at random while they wait or hold. Each
// holder takes a witness lock per device it was granted without waiting:
// one it finds taken by a holder that was not killed is a device held
// twice. Those not killed must be granted, in turn, and every device's
// holders (from their own records) must never overlap.
func TestPoolNeverHeldTwice(t *testing.T) {
	e := newEnv(t)
	witnesses := t.TempDir()
	killed := filepath.Join(t.TempDir(), "killed")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	const contenders, atOnce = 30, 6
	type run struct {
		cmd    *exec.Cmd
		out    *bufio.Reader
		count  int
		killed bool
		done   chan error
	}
	runs := make([]*run, contenders)
	live := 0
	next := 0
	for next < contenders || live > 0 {
		for next < contenders && live < atOnce {
			n := 1 + rng.IntN(2)
			cmd, out := e.start(t, strconv.Itoa(next), fmt.Sprintf("HOLD_FOR=%dms", rng.IntN(40)), "HOLD_POOL=npu0,npu1", "HOLD_COUNT="+strconv.Itoa(n), "HOLD_WITNESS="+witnesses, "HOLD_KILLED="+killed)
			r := &run{cmd: cmd, out: out, count: n, done: make(chan error, 1)}
			go func() {
				b, _ := io.ReadAll(r.out)
				err := r.cmd.Wait()
				if err != nil && len(b) > 0 {
					err = fmt.Errorf("%v: %s", err, b)
				}
				r.done <- err
			}()
			runs[next] = r
			next++
			live++
		}
		// Now and then one is killed, waiting or holding, at a moment of
		// chance; the others run to their end.
		var waitFor <-chan time.Time
		if rng.IntN(3) == 0 {
			waitFor = time.After(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
		var running []*run
		for _, r := range runs[:next] {
			if r != nil && r.done != nil && !r.killed {
				running = append(running, r)
			}
		}
		cases := make([]reflect.SelectCase, 0, len(running)+1)
		for _, r := range running {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.done)})
		}
		if waitFor != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(waitFor)})
		}
		if len(cases) == 0 {
			break
		}
		i, v, _ := reflect.Select(cases)
		if i == len(running) {
			r := running[rng.IntN(len(running))]
			// Half the time, one that holds.
			var holding []*run
			for _, c := range running {
				if id := strconv.Itoa(slices.Index(runs, c)); e.recorded(id, "start") && !e.recorded(id, "end") {
					holding = append(holding, c)
				}
			}
			if len(holding) > 0 && rng.IntN(2) == 0 {
				r = holding[rng.IntN(len(holding))]
			}
			f, err := os.OpenFile(killed, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(f, r.cmd.Process.Pid)
			f.Close()
			r.killed = true
			r.cmd.Process.Kill()
			<-r.done
			r.done = nil
			live--
			continue
		}
		r := running[i]
		if err, _ := v.Interface().(error); err != nil {
			t.Errorf("contender %d (%d devices): %v", slices.Index(runs, r), r.count, err)
		}
		r.done = nil
		live--
	}
	evs := events(t, e.record)
	starts := map[string]event{}
	type interval struct {
		id       string
		from, to int64
	}
	per := map[string][]interval{}
	ended := 0
	for _, ev := range evs {
		switch ev.what {
		case "start":
			starts[ev.id] = ev
		case "end":
			ended++
			s := starts[ev.id]
			i, _ := strconv.Atoi(ev.id)
			if len(s.devices) != runs[i].count {
				t.Errorf("contender %s held %v, want %d devices", ev.id, s.devices, runs[i].count)
			}
			for _, d := range s.devices {
				per[d] = append(per[d], interval{ev.id, s.at, ev.at})
			}
		}
	}
	for i, r := range runs {
		if !r.killed && !slices.ContainsFunc(evs, func(ev event) bool { return ev.id == strconv.Itoa(i) && ev.what == "end" }) {
			t.Errorf("contender %d was not killed and never ended a hold", i)
		}
	}
	if ended == 0 {
		t.Error("no contender ended a hold")
	}
	killedHolding := 0
	for i, r := range runs {
		if _, ok := starts[strconv.Itoa(i)]; ok && r.killed {
			killedHolding++
		}
	}
	t.Logf("%d holds ended; %d contenders killed, %d of them once granted", ended, len(slices.DeleteFunc(slices.Clone(runs), func(r *run) bool { return !r.killed })), killedHolding)
	for d, iv := range per {
		slices.SortFunc(iv, func(a, b interval) int { return cmpInt64(a.from, b.from) })
		for k := 1; k < len(iv); k++ {
			if iv[k].from < iv[k-1].to {
				t.Errorf("%s held by contenders %s and %s at once", d, iv[k-1].id, iv[k].id)
			}
		}
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A waiter blocks on every holder of the pool at once and is granted when
// the first goes; its waits on the others go on, each on a descriptor of
// that holder's ticket. None of them may reach a command started under the
// grant: there it would keep another's ticket open (a locker of it, to
// status) after that holder and this one are gone.
func TestWaitsDoNotReachCommands(t *testing.T) {
	dir := t.TempDir()
	pool := &Pool{Name: "npu", Members: []Member{{"npu0", "0"}, {"npu1", "1"}}}
	dev := func() *Device { return &Device{Dir: dir, Name: "npu", Pool: pool, Count: 1} }
	a, err := dev().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := dev().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	got := make(chan *Ticket, 1)
	go func() {
		tk, err := dev().Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- tk
	}()
	eventually(t, "the waiter queued", func() bool {
		st, _ := dev().Status()
		return st != nil && len(st.Queue) == 1
	})
	a.Release()
	c := <-got
	if c == nil {
		return
	}
	defer c.Release()
	bPath := filepath.Join(dir, b.name)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, e := range fds {
		fd, _ := strconv.Atoi(e.Name())
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); target != bPath {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("fd %d, of the other holder's ticket %s, is not close-on-exec: a command started now would inherit it", fd, b.name)
		}
	}
}
