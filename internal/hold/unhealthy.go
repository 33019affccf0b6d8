package hold

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
)

// A stop that leaves survivors (a process that could not be ended: one
// stuck in the NPU's driver may outlive a kill until a reboot) leaves the
// device in doubt. Its holder says so in a marker beside its ticket, one
// for each device it holds:
//
//	D.u.NNNNNNNNNNNNNNNNNNNN  the survivors of ticket N on device D
//
// made like a ticket (a new file of its own, renamed into place only if the
// name is free; see publish), and read like one: bounded, its text
// another user's words, its owner as the system says. A marker says
// something for as long as one of the processes it names runs (the same
// process: one that started after the marker was written only has its
// pid); once they are gone, its owner removes it the next time it looks,
// and a marker of someone else's is passed over.

const unhealthyKind = 'u'

// Bounds on what is read of markers.
const (
	maxMarkers   = 64 // markers of one device shown
	maxSurvivors = 64 // survivors of one marker
)

// Survivor is a process of a serve that could not be ended.
type Survivor struct {
	PID   int    `json:"pid"`
	Image string `json:"image,omitempty"` // its program or command line, as the stop saw it
	// Started is when the process started, as the system said when it was
	// noted; zero where it could not be read. A process with its pid that
	// started later is another one.
	Started time.Time `json:"started,omitzero"`
}

// Unhealthy is a marker: a device that may be unhealthy, because a stop
// under a ticket left processes that could not be ended.
type Unhealthy struct {
	Device    string     `json:"device"`
	Ticket    uint64     `json:"ticket"`
	User      string     `json:"user"`
	PID       int        `json:"pid"` // the holder that noted it
	Command   string     `json:"command,omitempty"`
	RunURL    string     `json:"run_url,omitempty"`
	When      time.Time  `json:"when"`
	Survivors []Survivor `json:"survivors"`
	// Seen is whose the marker's file is, as the system says; set only
	// when a marker is read.
	Seen *Seen `json:"seen,omitempty"`
}

// clean makes a marker read from a file anyone could have written safe to
// print, and bounded.
func (u *Unhealthy) clean() {
	u.Device = clip(u.Device, maxName)
	u.User = clip(u.User, maxName)
	u.Command = clip(u.Command, maxShown)
	u.RunURL = clip(u.RunURL, maxShown)
	if len(u.Survivors) > maxSurvivors {
		u.Survivors = u.Survivors[:maxSurvivors]
	}
	for i := range u.Survivors {
		u.Survivors[i].Image = clip(u.Survivors[i].Image, maxShown)
	}
}

// String says it for people: which processes of whose ticket could not be
// ended, and when.
func (u Unhealthy) String() string {
	var procs []string
	for _, s := range u.Survivors {
		p := fmt.Sprintf("pid %d", s.PID)
		if s.Image != "" {
			p += " (" + clip(s.Image, maxShown) + ")"
		}
		procs = append(procs, p)
	}
	user := clip(u.User, maxName)
	if u.Seen != nil && u.Seen.User != "" && u.Seen.User != u.User {
		user = clip(u.Seen.User, maxName)
	}
	s := fmt.Sprintf("the device may be unhealthy: %s could not be ended when ticket %d of %s stopped, at %s",
		strings.Join(procs, ", "), u.Ticket, user, u.When.UTC().Format("2006-01-02 15:04:05 UTC"))
	if u.RunURL != "" {
		s += " (run " + clip(u.RunURL, maxShown) + ")"
	}
	return s
}

// markerName is the marker of ticket n on device p.
func markerName(p string, n uint64) string { return entryName(p, unhealthyKind, n) }

// parseMarker reads a marker's name of device p: P.u.N exactly, or with a
// suffix of a dot and 16 hex digits where the name was taken.
func parseMarker(p, name string) (n uint64, ok bool) {
	rest, found := strings.CutPrefix(name, p+"."+string(rune(unhealthyKind))+".")
	if !found || len(rest) < 20 {
		return 0, false
	}
	digits, tail := rest[:20], rest[20:]
	if strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	if tail != "" && (len(tail) != 17 || tail[0] != '.' || strings.Trim(tail[1:], "0123456789abcdef") != "") {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// NoteSurvivors records, for each device the ticket holds, that the stop
// under it left procs that could not be ended: status and the next ticket
// of the device say the device may be unhealthy for as long as one of
// them runs. None is nothing to note.
func (t *Ticket) NoteSurvivors(procs []Survivor) error {
	if len(procs) == 0 {
		return nil
	}
	u := Unhealthy{Ticket: t.Facts.Ticket, User: t.Facts.User, PID: t.Facts.PID, Command: t.Facts.Command, RunURL: t.Facts.RunURL, When: time.Now()}
	for _, p := range procs {
		if p.Started.IsZero() {
			p.Started, _ = processStarted(p.PID)
		}
		u.Survivors = append(u.Survivors, p)
	}
	var errs []string
	for _, name := range t.Names() {
		u.Device = name
		b, _ := json.Marshal(u)
		file := markerName(name, u.Ticket)
		f, err := t.dir.publish(file, append(b, '\n'))
		for i := 0; errors.Is(err, os.ErrExist) && i < 10; i++ {
			// The name was taken by someone else.
			f, err = t.dir.publish(file+"."+randomName(), append(b, '\n'))
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		f.Close()
	}
	if len(errs) > 0 {
		return fmt.Errorf("the device's unhealthy marker is not written (%s)", strings.Join(errs, "; "))
	}
	return nil
}

// ParseSurvivors reads a stop's survivors as it lists them, "PID IMAGE"
// (serve.Stopped's Left); a line that does not start with a pid is passed
// over.
func ParseSurvivors(left []string) []Survivor {
	var out []Survivor
	for _, l := range left {
		pid, image, _ := strings.Cut(strings.TrimSpace(l), " ")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			continue
		}
		out = append(out, Survivor{PID: n, Image: strings.TrimSpace(image)})
	}
	return out
}

// stillThere tells whether a survivor noted in a marker still runs: its
// pid, not this process's, and, where both are known, the same start.
func (s Survivor) stillThere() bool {
	// The reader is no survivor, whatever pid a marker names (Windows
	// gives a pid again soon after its process ends).
	if s.PID <= 0 || s.PID == os.Getpid() || !alive(s.PID) {
		return false
	}
	if s.Started.IsZero() {
		return true
	}
	now, ok := processStarted(s.PID)
	if !ok {
		return true
	}
	d := now.Sub(s.Started)
	return d <= time.Second && d >= -time.Second
}

// unhealthy reads the markers of devices whose processes still run, in
// the order of their tickets. Markers of this user whose processes are all
// gone are removed.
func (dir *lockDir) unhealthy(devices []string) []Unhealthy {
	names, _ := dir.names()
	var out []Unhealthy
	for _, name := range names {
		dev, n := "", uint64(0)
		for _, d := range devices {
			if m, ok := parseMarker(d, name); ok {
				dev, n = d, m
			}
		}
		if dev == "" {
			continue
		}
		f, st, err := dir.open(name)
		if err != nil {
			continue
		}
		var u Unhealthy
		if json.Unmarshal(read(f), &u) != nil {
			f.Close()
			continue
		}
		u.Survivors = slices.DeleteFunc(u.Survivors[:min(len(u.Survivors), maxSurvivors)], func(s Survivor) bool { return !s.stillThere() })
		if len(u.Survivors) == 0 {
			if st.mine {
				dir.remove(name, f)
			}
			f.Close()
			continue
		}
		f.Close()
		// The file's name says which device and ticket, whatever its
		// text claims.
		u.Device, u.Ticket = dev, n
		u.Seen = &Seen{UID: st.uid, User: ownerNamed(st.owner), Changed: st.changed}
		u.clean()
		out = append(out, u)
		if len(out) == maxMarkers {
			break
		}
	}
	slices.SortFunc(out, func(a, b Unhealthy) int { return cmpUint(a.Ticket, b.Ticket) })
	return out
}

// warnUnhealthy tells a new holder of the markers on its devices.
func warnUnhealthy(w io.Writer, us []Unhealthy) {
	if w == nil {
		return
	}
	for _, u := range us {
		fmt.Fprintf(w, "npu-hold: warning: %s: %s; if it does not go, reboot the machine (npu-hold doctor)\n", console.Text(u.Device), u)
	}
}
