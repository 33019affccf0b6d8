package hold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The queue of a device (or pool) P is a set of files in the lock
// directory, each made and flocked by its owner:
//
//	P.q.NNNNNNNNNNNNNNNNNNNN  a waiter, number N in order of arrival
//	P.h.NNNNNNNNNNNNNNNNNNNN  a holder, with the devices it holds
//
// Numbers are taken under a flock of the lock directory itself, which no
// user but root can remove or replace. A waiter is granted once no live
// waiter is ahead of it and enough devices are free; it publishes its
// holding file before it gives up its waiting one, so that whoever sees the
// waiter gone also sees what it holds.

const (
	waiting = 'q'
	holding = 'h'
)

// CheckName says what is wrong with name as a device's or a pool's name,
// or nil. Its ticket files are named NAME.q.N and NAME.h.N (a holding one
// may carry a suffix), so a name holding ".q." or ".h." would have tickets
// that read as those of the name before it: the holder of
// npu.h.00000000000000000001 would be read as holding npu.
func CheckName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("device %q: pass a plain name such as npu", name)
	}
	for _, sep := range []string{".q.", ".h."} {
		if i := strings.Index(name, sep); i >= 0 {
			return fmt.Errorf("device %q: a device name may not hold %q: ticket files are named DEVICE.q.N and DEVICE.h.N, so its tickets would read as those of %q; rename it, e.g. %s",
				name, sep, name[:i], strings.ReplaceAll(name, ".", "-"))
		}
	}
	return nil
}

func entryName(p string, kind byte, n uint64) string {
	return fmt.Sprintf("%s.%c.%020d", p, kind, n)
}

// parseEntry reads a name of P's queue. Holding files may carry a suffix
// (a name taken by someone else is not waited for).
func parseEntry(p, name string) (kind byte, n uint64, ok bool) {
	rest, found := strings.CutPrefix(name, p+".")
	if !found || len(rest) < 22 || rest[1] != '.' || (rest[0] != waiting && rest[0] != holding) {
		return 0, 0, false
	}
	digits, tail := rest[2:22], rest[22:]
	if strings.Trim(digits, "0123456789") != "" || (tail != "" && (rest[0] == waiting || tail[0] != '.')) {
		return 0, 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return rest[0], n, err == nil
}

// entry is a live ticket of the queue, open.
type entry struct {
	kind  byte
	n     uint64
	name  string
	file  *os.File
	facts *Facts // nil when its text is not facts
	seen  Seen   // its owner and locker, as the system says
	stat  fileStat
}

func closeAll(es []entry) {
	for _, e := range es {
		e.file.Close()
	}
}

// scan opens the live entries of a kind with numbers below limit, oldest
// first. Dead ones of ours are removed; anything that is not a regular file
// is passed over.
func (d *Device) scan(dir *lockDir, kind byte, limit uint64) []entry {
	names, _ := dir.names()
	var out []entry
	var lockers map[fileID]int
	users := map[string]string{}
	for _, name := range names {
		k, n, ok := parseEntry(d.Name, name)
		if !ok || k != kind || n >= limit {
			continue
		}
		f, st, err := dir.open(name)
		if err != nil {
			continue
		}
		if !isLive(f) {
			if st.mine {
				dir.remove(name, f)
			}
			f.Close()
			continue
		}
		if lockers == nil {
			lockers = flockers()
		}
		if _, ok := users[st.owner]; !ok {
			users[st.owner] = ownerNamed(st.owner)
		}
		e := entry{kind: k, n: n, name: name, file: f, stat: st}
		e.seen = Seen{UID: st.uid, User: users[st.owner], LockPID: lockers[st.id], Changed: st.changed}
		var facts Facts
		if json.Unmarshal(read(f), &facts) == nil {
			// Kept as written (String escapes what it prints), but for
			// the number of devices, which the grant goes through.
			if len(facts.Devices) > maxDevices {
				facts.Devices = facts.Devices[:maxDevices]
			}
			seen := e.seen
			facts.Seen = &seen
			e.facts = &facts
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b entry) int { return cmpUint(a.n, b.n) })
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// enqueue takes the next number and puts a locked waiting file under it.
// Taking the number and publishing the file happen under the directory's
// lock, so every live ticket that exists when a number is taken has a
// smaller one.
func (d *Device) enqueue(ctx context.Context, dir *lockDir, facts Facts) (*os.File, uint64, error) {
	unlock, err := dir.lockQueue(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer unlock()
	for range 100 {
		n, err := d.nextNumber(dir)
		if err != nil {
			return nil, 0, err
		}
		facts.Ticket = n
		b, _ := json.Marshal(facts)
		f, err := dir.publish(entryName(d.Name, waiting, n), append(b, '\n'))
		if errors.Is(err, os.ErrExist) {
			// Someone outside the queue's lock took the name: the next.
			continue
		}
		return f, n, err
	}
	return nil, 0, fmt.Errorf("a ticket cannot be made in %s: every number tried is taken", dir.path)
}

// nextNumber is the number after the last live ticket of the queue (1 when
// none is live), past the names dead files hold. Only live tickets count:
// a file nobody locks, whoever put it there and under whatever number,
// neither uses numbers up nor blocks the queue; the numbers start again
// from 1 whenever the queue is empty.
func (d *Device) nextNumber(dir *lockDir) (uint64, error) {
	names, err := dir.names()
	if err != nil {
		return 0, err
	}
	live := append(d.scan(dir, waiting, math.MaxUint64), d.scan(dir, holding, math.MaxUint64)...)
	closeAll(live)
	var last entry
	for _, e := range live {
		if e.n > last.n {
			last = e
		}
	}
	taken := map[string]bool{}
	for _, name := range names {
		taken[name] = true
	}
	for n := last.n + 1; n != 0; n++ {
		if !taken[entryName(d.Name, waiting, n)] {
			return n, nil
		}
	}
	return 0, fmt.Errorf("the ticket numbers of %s are used up: the live ticket %s/%s of %s has number %d, and the names after it are taken; new tickets can be taken once it is gone", d.Name, dir.path, last.name, ownerOf(last.stat), last.n)
}

// wait blocks until no live waiter is ahead of ticket n and count devices
// are free, and returns the free devices to take.
func (d *Device) wait(ctx context.Context, dir *lockDir, n uint64, start time.Time) ([]Member, error) {
	every := d.Every
	if every == 0 {
		every = 5 * time.Second
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	p := progress{d: d}
	for {
		ahead := d.scan(dir, waiting, n)
		var done <-chan error
		if len(ahead) > 0 {
			// Block on the waiter just ahead: it goes when it is granted,
			// gives up or dies.
			holders := d.scan(dir, holding, math.MaxUint64)
			p.say(ahead, holders)
			closeAll(holders)
			closeAll(ahead[:len(ahead)-1])
			next := ahead[len(ahead)-1]
			done = waitGone(next.file)
			next.file.Close()
		} else {
			// First in line: the holders were published before their
			// waiting files went, so this scan sees every one of them.
			holders := d.scan(dir, holding, math.MaxUint64)
			free := d.free(holders)
			if len(free) >= d.count() {
				closeAll(holders)
				return free[:d.count()], nil
			}
			p.say(nil, holders)
			// Block until any holder of the pool goes.
			var chans []<-chan error
			for _, h := range holders {
				chans = append(chans, waitGone(h.file))
			}
			closeAll(holders)
			done = first(chans)
		}
	waiting:
		for {
			select {
			case err := <-done:
				if err != nil {
					return nil, err
				}
				break waiting
			case <-ticker.C:
				ahead := d.scan(dir, waiting, n)
				holders := d.scan(dir, holding, math.MaxUint64)
				p.say(ahead, holders)
				closeAll(ahead)
				closeAll(holders)
			case <-ctx.Done():
				return nil, d.giveUp(ctx, ctx.Err(), start)
			}
		}
	}
}

// first reports the first of chans to report.
func first(chans []<-chan error) <-chan error {
	out := make(chan error, len(chans))
	for _, c := range chans {
		go func() { out <- <-c }()
	}
	return out
}

// free are the pool's devices no live holder holds, in the pool's order.
func (d *Device) free(holders []entry) []Member {
	taken := map[string]bool{}
	for _, h := range holders {
		devs, _ := d.devicesOf(h)
		for _, name := range devs {
			taken[name] = true
		}
	}
	var free []Member
	for _, m := range d.members() {
		if !taken[m.Name] {
			free = append(free, m)
		}
	}
	return free
}

// devicesOf are the devices a live holder of the queue holds, as the grant
// counts them: those its facts name when they are devices of the pool (or
// the one device), each once; every one of them otherwise, with the reason
// why. A live holding file is not ours to doubt, nor to take at its word.
func (d *Device) devicesOf(h entry) ([]string, string) {
	var all []string
	for _, m := range d.members() {
		all = append(all, m.Name)
	}
	every := "every device of " + d.Name
	if d.Pool == nil {
		every = d.Name
	}
	doubt := func(why string) ([]string, string) {
		return all, why + ": counted as holding " + every
	}
	if h.facts == nil {
		return doubt("its facts cannot be read")
	}
	devs := h.facts.Devices
	if len(devs) == 0 {
		return doubt("it names no device")
	}
	for i, name := range devs {
		if !slices.Contains(all, name) {
			return doubt(fmt.Sprintf("it names %s, not %s", quote(name), strings.Replace(every, "every device", "a device", 1)))
		}
		if slices.Contains(devs[:i], name) {
			return doubt(fmt.Sprintf("it names %s twice", quote(name)))
		}
	}
	return devs, ""
}

func (d *Device) giveUp(ctx context.Context, err error, start time.Time) error {
	if errors.Is(err, context.DeadlineExceeded) {
		te := &TimeoutError{Device: d.Name, Waited: time.Since(start)}
		if st, serr := d.Status(); serr == nil {
			te.Holder = st.Holder
			// A holder that is gone while its ticket stays taken: name what
			// keeps it.
			if st.Holder == nil || !alive(st.Holder.pid()) {
				for _, pid := range st.Lockers {
					if pid != os.Getpid() {
						te.Keepers = append(te.Keepers, describe(pid))
					}
				}
			}
		}
		return te
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stopped waiting for %s: %w", d.Name, ctx.Err())
	}
	return err
}

// progress says where a waiter stands: when its place or the holder
// changes, and otherwise now and then, so a long wait is not a wall of the
// same line.
type progress struct {
	d    *Device
	last string
	at   time.Time
}

func (p *progress) say(ahead, holders []entry) {
	d := p.d
	if d.Log == nil || len(ahead)+len(holders) == 0 {
		return
	}
	remind := d.Remind
	if remind == 0 {
		remind = time.Minute
	}
	var holder Facts
	if len(holders) > 0 {
		holder = d.shown(holders[0])
	} else {
		holder = d.shown(ahead[0])
	}
	who := holder.String()
	key := fmt.Sprint(len(ahead), len(holders), holder.Ticket, holder.pid())
	if key == p.last && time.Since(p.at) < remind {
		return
	}
	p.last, p.at = key, time.Now()
	if d.Pool == nil {
		n := len(ahead) + len(holders)
		fmt.Fprintf(d.Log, "npu-hold: waiting for %s: place %d in the queue (%d ahead); held by %s\n", d.Name, n+1, n, who)
		return
	}
	held := len(d.members()) - len(d.free(holders))
	fmt.Fprintf(d.Log, "npu-hold: waiting for %d of pool %s: place %d in the queue (%d ahead); %d of %d devices held, the first by %s\n",
		d.count(), d.Name, len(ahead)+1, len(ahead), held, len(d.members()), who)
}
