package serve

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Process is a started serve, held in its Job Object by this process.
type Process struct {
	pid     int // the serve's, and its process group's
	started time.Time
	held    []*os.File // the ticket's files: this process holds them, the serve never does

	jobMu sync.RWMutex
	job   windows.Handle // kill-on-close, not inheritable; 0 once closed

	done chan struct{} // closed when the serve has exited
	code uint32        // its exit status, once done
	lost string        // why its exit was not seen, once done
	// sent is what the stop had sent when the serve ended: "",
	// "CTRL_BREAK" or "TERMINATE".
	sentMu   sync.Mutex
	sent     string
	stopOnce sync.Once
	stopped  Stopped
}

// terminateCode is the exit status TerminateJobObject gives every process
// of the job: 137, as a shell shows a process SIGKILL ended.
const terminateCode = 137

// controlCExit is STATUS_CONTROL_C_EXIT, the status of a process that a
// console's CTRL_C or CTRL_BREAK ended (its default handler).
const controlCExit = 0xC000013A

// assignToJob and resumeThreads put the suspended serve in its job and let
// it run: variables so that a test can make the assignment fail.
var (
	assignToJob = windows.AssignProcessToJobObject
	jobMembers  = queryJobMembers
)

// Start starts the serve in a Job Object of its own. The serve is created
// suspended (CREATE_SUSPENDED), in a process group of its own
// (CREATE_NEW_PROCESS_GROUP, so a CTRL_BREAK can be sent to it alone), put
// in the job, and only then resumed: its first instruction runs in the
// job, so whatever it starts is in the job too. The job kills every member
// when its last handle closes (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE), and
// that handle is this process's alone (not inheritable): a gate that dies,
// killed or not, ends the serve and all it started. The job allows no
// breakaway: a CreateProcess with CREATE_BREAKAWAY_FROM_JOB inside it fails
// (ERROR_ACCESS_DENIED). Where the serve cannot be put in the job, it is
// ended before it ran, and Start fails.
//
// The serve inherits its standard handles and nothing else: os/exec on
// Windows hands a child the handles it names in the handle list
// (PROC_THREAD_ATTRIBUTE_HANDLE_LIST, syscall.StartProcess), stdin, stdout
// and stderr, and refuses ExtraFiles. The ticket's files (o.ExtraFiles) stay
// with this process, which keeps them until Stop.
func Start(o Options) (*Process, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("no serve command")
	}
	job, err := newJob()
	if err != nil {
		return nil, fmt.Errorf("the serve's Job Object: %w", err)
	}
	cmd := exec.Command(o.Argv[0], o.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	if o.Stdin != nil {
		cmd.Stdin = o.Stdin
	}
	if o.Stdout != nil {
		cmd.Stdout = o.Stdout
	}
	if o.Stderr != nil {
		cmd.Stderr = o.Stderr
	}
	cmd.Env = o.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP}
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return nil, err
	}
	at := time.Now()
	pid := cmd.Process.Pid
	if err := enter(job, pid); err != nil {
		// Still suspended: it never ran an instruction of its own.
		cmd.Process.Kill()
		cmd.Wait()
		windows.CloseHandle(job)
		return nil, fmt.Errorf("%s (pid %d) could not be put in its Job Object, and was ended before it ran: %w", o.Argv[0], pid, err)
	}
	p := &Process{pid: pid, started: at, held: o.ExtraFiles, job: job, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if cmd.ProcessState == nil {
			p.code, p.lost = 1<<32-1, fmt.Sprint(err)
		} else if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			p.code = ws.ExitCode
		} else {
			p.code, p.lost = 1<<32-1, fmt.Sprint(err)
		}
		close(p.done)
	}()
	return p, nil
}

// newJob makes the serve's Job Object: unnamed, its handle not inheritable,
// every member killed when the last handle closes or when one of them
// fails with an exception nobody handles (rather than wait on an error
// dialog), and no breakaway.
func newJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("CreateJobObject: %w", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("SetInformationJobObject (kill on close): %w", err)
	}
	return job, nil
}

// enter puts the suspended process pid in job and resumes it. Go's os/exec
// closes the primary thread's handle before Start returns: the thread is
// found again in a toolhelp snapshot of the threads (the process's only
// one, while it is suspended) and resumed through its own handle
// (THREAD_SUSPEND_RESUME), not with NtResumeProcess, which needs
// PROCESS_SUSPEND_RESUME on the process.
func enter(job windows.Handle, pid int) error {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return fmt.Errorf("OpenProcess: %w", err)
	}
	defer windows.CloseHandle(h)
	if err := assignToJob(job, h); err != nil {
		return fmt.Errorf("AssignProcessToJobObject: %w", err)
	}
	return resumeThreads(pid)
}

// resumeThreads resumes each thread of pid once.
func resumeThreads(pid int) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("CreateToolhelp32Snapshot (threads): %w", err)
	}
	defer windows.CloseHandle(snap)
	var e windows.ThreadEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	resumed := 0
	for err = windows.Thread32First(snap, &e); err == nil; err = windows.Thread32Next(snap, &e) {
		if e.OwnerProcessID != uint32(pid) {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, e.ThreadID)
		if err != nil {
			return fmt.Errorf("OpenThread %d: %w", e.ThreadID, err)
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return fmt.Errorf("ResumeThread %d: %w", e.ThreadID, err)
		}
		resumed++
	}
	if resumed == 0 {
		return fmt.Errorf("no thread of pid %d found to resume", pid)
	}
	return nil
}

// basicProcessIDList is JOBOBJECT_BASIC_PROCESS_ID_LIST with room for one
// id; a longer list is read into a larger buffer of the same layout.
type basicProcessIDList struct {
	Assigned, InList uint32
	IDs              [1]uintptr
}

// queryJobMembers is the pids of the job's processes
// (JobObjectBasicProcessIdList).
func queryJobMembers(job windows.Handle) ([]int, error) {
	n := 64
	for range 8 {
		words := int(unsafe.Offsetof(basicProcessIDList{}.IDs))/int(unsafe.Sizeof(uintptr(0))) + n
		buf := make([]uintptr, words)
		l := (*basicProcessIDList)(unsafe.Pointer(&buf[0]))
		err := windows.QueryInformationJobObject(job, windows.JobObjectBasicProcessIdList, uintptr(unsafe.Pointer(&buf[0])), uint32(len(buf))*uint32(unsafe.Sizeof(uintptr(0))), nil)
		if err == nil || errors.Is(err, windows.ERROR_MORE_DATA) {
			if int(l.Assigned) > int(l.InList) || err != nil {
				n = max(2*n, int(l.Assigned)+16)
				continue
			}
			ids := unsafe.Slice(&l.IDs[0], l.InList)
			out := make([]int, 0, len(ids))
			for _, id := range ids {
				out = append(out, int(id))
			}
			return out, nil
		}
		return nil, fmt.Errorf("QueryInformationJobObject (process ids): %w", err)
	}
	return nil, errors.New("the job's process list kept growing")
}

// members is the job's processes now; nil once the job is closed.
func (p *Process) members() ([]int, error) {
	p.jobMu.RLock()
	defer p.jobMu.RUnlock()
	if p.job == 0 {
		return nil, nil
	}
	return jobMembers(p.job)
}

// closeJob closes the job's handle: what is left in it is killed.
func (p *Process) closeJob() {
	p.jobMu.Lock()
	defer p.jobMu.Unlock()
	if p.job != 0 {
		windows.CloseHandle(p.job)
		p.job = 0
	}
}

// PID is the serve's process id, and its process group's.
func (p *Process) PID() int { return p.pid }

// SupervisorPID is the process that holds the serve: on Windows, this one,
// which holds its Job Object.
func (p *Process) SupervisorPID() int { return os.Getpid() }

// Contain names the mechanism that holds the serve's tree: "job", a Job
// Object; no cgroup, and nothing passed over.
func (p *Process) Contain() (mechanism, cgroup, why string) { return "job", "", "" }

// Early is false on Windows: there is no first stage.
func (p *Process) Early() bool { return false }

// Done is closed once the serve has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit describes how the serve ended: "exited with status 3", "stopped by
// the gate (TERMINATE)", "exited with status 0 on the gate's CTRL_BREAK";
// "" while it runs.
func (p *Process) Exit() string {
	select {
	case <-p.done:
	default:
		return ""
	}
	if p.lost != "" {
		return "ended unseen: " + p.lost
	}
	p.sentMu.Lock()
	sent := p.sent
	p.sentMu.Unlock()
	return exitText(p.code, sent)
}

// exitText says how a serve that exited with code ended, given what the
// stop had sent.
func exitText(code uint32, sent string) string {
	status := fmt.Sprintf("status %d", code)
	if code >= 0xC0000000 {
		status = fmt.Sprintf("status 0x%X", code)
	}
	switch {
	case sent == "TERMINATE" && code == terminateCode:
		return "stopped by the gate (TERMINATE)"
	case sent != "" && code == controlCExit:
		return "stopped by the gate (CTRL_BREAK)"
	case sent != "":
		return fmt.Sprintf("exited with %s on the gate's %s", status, sent)
	default:
		return "exited with " + status
	}
}

// ExitCode is the serve's exit status, or -1 while it runs.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return int(p.code)
	default:
		return -1
	}
}

// Signal is 0 on Windows: no signal ends a process there.
func (p *Process) Signal() syscall.Signal { return 0 }

// SupervisorRunning reports whether this process still holds the serve's
// job: until Stop, which closes it.
func (p *Process) SupervisorRunning() bool {
	p.jobMu.RLock()
	defer p.jobMu.RUnlock()
	return p.job != 0
}

// Tree is the serve's processes now: the members of its job.
func (p *Process) Tree() []int {
	pids, _ := p.members()
	return pids
}

func (p *Process) setSent(s string) {
	p.sentMu.Lock()
	p.sent = s
	p.sentMu.Unlock()
}

// pollJob is how often the stop reads the job's members while it waits.
const pollJob = 10 * time.Millisecond

func (p *Process) stop(grace, within time.Duration) Stopped {
	start := time.Now()
	st := Stopped{Contain: "job"}
	defer func() {
		p.closeJob()
		runtime.KeepAlive(p.held)
	}()
	select {
	case <-p.done:
	default:
		p.setSent("CTRL_BREAK")
		st.Signal = "CTRL_BREAK"
		// Delivered where the serve shares this process's console (it
		// inherits it); a gate with no console sends nothing.
		// A CTRL_BREAK that could not be sent is no reason to wait: the
		// grace is skipped.
		wait := grace
		if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(p.pid)); err != nil {
			st.Polite = fmt.Sprintf("no CTRL_BREAK could be sent to process group %d: %v", p.pid, err)
			wait = 0
		} else {
			st.Polite = fmt.Sprintf("CTRL_BREAK to process group %d", p.pid)
		}
		t := time.NewTimer(wait)
		select {
		case <-p.done:
			t.Stop()
		case <-t.C:
		}
	}
	alive, err := p.members()
	if len(alive) > 0 || err != nil {
		for _, pid := range alive {
			if pid != p.pid {
				st.Swept++
			}
		}
		select {
		case <-p.done:
		default:
			p.setSent("TERMINATE")
			st.Signal = "TERMINATE"
		}
		p.jobMu.RLock()
		terr := windows.TerminateJobObject(p.job, terminateCode)
		p.jobMu.RUnlock()
		if terr != nil {
			// Each member then, as far as this user may end it.
			for _, pid := range alive {
				terminate(pid)
			}
		}
	}
	// The bounded wait: for the job to be empty, and the serve's exit seen.
	until := start.Add(grace + within)
	for (len(alive) > 0 || err != nil) && time.Now().Before(until) {
		time.Sleep(pollJob)
		alive, err = p.members()
	}
	rest := time.NewTimer(max(time.Until(until), 0))
	select {
	case <-p.done:
	case <-rest.C:
	}
	rest.Stop()
	st.StopMS = float64(time.Since(start)) / float64(time.Millisecond)
	select {
	case <-p.done:
		st.Exit = p.Exit()
	default:
		st.Exit = "still running after " + time.Since(start).Round(time.Millisecond).String()
	}
	slices.Sort(alive)
	for _, pid := range alive {
		pr := survivor(pid)
		st.Left = append(st.Left, fmt.Sprintf("%d %s", pr.PID, pr.Command))
		st.Survived = append(st.Survived, pr)
	}
	if err != nil {
		// Nothing can be counted: none is taken for none.
		st.Left = append(st.Left, "? the job's members could not be read: "+err.Error())
	}
	st.Survivors = len(st.Left)
	return st
}

// survivor names a process that outlived the stop: its pid and the full
// path of its image where it may be opened, else the snapshot's name.
func survivor(pid int) Proc {
	pr := Proc{PID: pid, State: 'R', Command: "(image unknown)"}
	if s, ok := Stat(pid); ok {
		pr = s
	}
	if h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid)); err == nil {
		if img, err := imagePath(h); err == nil {
			pr.Command = img
		}
		windows.CloseHandle(h)
	}
	return pr
}

// terminate ends one process, as far as this user may.
func terminate(pid int) {
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return
	}
	windows.TerminateProcess(h, terminateCode)
	windows.CloseHandle(h)
}

// Prepare does nothing on Windows: nothing is forked.
func Prepare() {}

// BecomeSubreaper does nothing on Windows: the job holds the serve's
// processes, whoever their parent.
func BecomeSubreaper() error { return nil }
