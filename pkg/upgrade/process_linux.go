//go:build linux

package upgrade

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LocalProcesses names this node's boot and the PID namespace this program
// sees, read from /proc.
func LocalProcesses() Processes {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return Processes{}
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return Processes{}
	}
	return Processes{BootID: strings.TrimSpace(string(boot)), PIDNamespace: ns}
}

// groupState tells whether the process group p.PID still has a process.
// The pid of a process group's leader is not used again while the group
// has members, so a leader that started at another time means the group
// has ended. Zombies left to be reaped do not count.
func groupState(p Process) CommandState {
	if st, ok := readStat(p.PID); ok && p.StartTicks != 0 && st.start != p.StartTicks {
		return CommandEnded
	}
	switch err := unix.Kill(-p.PID, 0); {
	case errors.Is(err, unix.ESRCH):
		return CommandEnded
	case err != nil && !errors.Is(err, unix.EPERM): // EPERM: it exists, someone else's
		return CommandUnknown
	}
	if onlyZombies(p.PID) {
		return CommandEnded
	}
	return CommandRunning
}

// onlyZombies reports whether every process of group pgid that /proc shows
// is a zombie (and it shows at least one).
func onlyZombies(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	zombies := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.pgrp != pgid {
			continue
		}
		if st.state != "Z" {
			return false
		}
		zombies++
	}
	return zombies > 0
}

// startTicks is when process pid started, in clock ticks since boot.
func startTicks(pid int) (uint64, bool) {
	st, ok := readStat(pid)
	return st.start, ok
}

type procStat struct {
	state string
	pgrp  int
	start uint64
}

// readStat reads the fields of /proc/PID/stat it needs; the command name
// in parentheses may hold spaces and parentheses itself.
func readStat(pid int) (procStat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	// From the state on: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime ...
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0], pgrp: pgrp, start: start}, true
}
