package proc

import (
	"crypto/sha256"
	"encoding/hex"
)

// Host is where a process id means something: this boot of the node, and
// the PID namespace this program sees. A container on the same node sees
// other pids; another boot reuses them.
type Host struct {
	BootID, PIDNamespace string
}

// Known reports whether the host could be read (Linux, /proc mounted).
func (h Host) Known() bool { return h.BootID != "" && h.PIDNamespace != "" }

// Key names the host in 16 hex digits: two processes with the same key see
// the same pids. "" when the host is not known.
func (h Host) Key() string {
	if !h.Known() {
		return ""
	}
	sum := sha256.Sum256([]byte(h.BootID + "\n" + h.PIDNamespace))
	return hex.EncodeToString(sum[:8])
}

// Identity names a process so that a program that comes later, on the same
// host, can tell whether it still runs: its pid, and when it started, so
// that a pid used again is not taken for it.
type Identity struct {
	Host
	PID int
	// StartTicks is when it started, in clock ticks since boot; 0 when
	// not known.
	StartTicks uint64
}

// Describe is the identity of process pid, seen from here; only its PID
// off Linux.
func Describe(pid int) Identity {
	h := LocalHost()
	if !h.Known() {
		return Identity{PID: pid}
	}
	start, _ := startTicks(pid)
	return Identity{Host: h, PID: pid, StartTicks: start}
}

// State is what can be known, here, of a process named by an Identity.
type State int

const (
	// Unknown is a process that runs (or ran) on another host, or was not
	// named well enough to tell.
	Unknown State = iota
	// Ended is a process, or a whole process group, with nothing left
	// running.
	Ended
	// Running is a process, or a process of its group, that still runs.
	Running
)

// seen reports whether id was named on this host, where pids can be
// looked at.
func (id Identity) seen() bool {
	return id.PID > 0 && id.Known() && id.Host == LocalHost()
}

// GroupState tells whether the process group id leads (a child Start
// started) still has a process. The pid of a group's leader is not used
// again while the group has members, so a leader that started at another
// time means the group has ended. Zombies left to be reaped do not count.
// Without StartTicks a group that took the pid again is taken for it.
func GroupState(id Identity) State {
	if !id.seen() {
		return Unknown
	}
	return groupState(id)
}

// ProcessState tells whether the process id itself still runs: its pid is
// gone, a zombie, or another process's (started at another time) once it
// has ended. Without StartTicks a pid used again is taken for it.
func ProcessState(id Identity) State {
	if !id.seen() {
		return Unknown
	}
	return processState(id)
}
