package proc

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LocalHost reads this host's boot id and PID namespace from /proc; the
// zero Host when it cannot.
func LocalHost() Host {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return Host{}
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return Host{}
	}
	return Host{BootID: strings.TrimSpace(string(boot)), PIDNamespace: ns}
}

func groupState(id Identity) State {
	if st, ok := readStat(id.PID); ok && id.StartTicks != 0 && st.start != id.StartTicks {
		return Ended
	}
	switch err := unix.Kill(-id.PID, 0); {
	case errors.Is(err, unix.ESRCH):
		return Ended
	case err != nil && !errors.Is(err, unix.EPERM): // EPERM: it exists, someone else's
		return Unknown
	}
	if onlyZombies(id.PID) {
		return Ended
	}
	return Running
}

func processState(id Identity) State {
	if st, ok := readStat(id.PID); ok {
		if id.StartTicks != 0 && st.start != id.StartTicks || st.state == "Z" || st.state == "X" {
			return Ended
		}
		return Running
	}
	// /proc may hide other users' processes (hidepid): ask the kernel,
	// which says "no such process" only for a pid that is free.
	if errors.Is(unix.Kill(id.PID, 0), unix.ESRCH) {
		return Ended
	}
	return Unknown
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
