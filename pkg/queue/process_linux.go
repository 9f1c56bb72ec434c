//go:build linux

package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processMark is this process's ProcessAnnotation, or "" when /proc cannot
// tell it.
func processMark() string {
	host := hostKey()
	if host == "" {
		return ""
	}
	pid := os.Getpid()
	_, start, err := procStat(pid)
	if err != nil {
		return ""
	}
	return host + "/" + strconv.Itoa(pid) + "/" + start
}

// processExited reports whether mark names a process of this host and pid
// namespace that has ended: its pid is gone, is a zombie, or belongs to a
// process that started at another time (the pid was reused).
func processExited(mark string) bool {
	host, rest, ok := strings.Cut(mark, "/")
	pidText, start, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || host == "" || host != hostKey() {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false // never signal a process group (pid 0 or negative)
	}
	state, started, err := procStat(pid)
	if err == nil {
		return started != start || state == "Z" || state == "X"
	}
	// /proc may hide other users' processes (hidepid): ask the kernel,
	// which says "no such process" only for a pid that is free.
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// hostKey names this boot of this host and this process's pid namespace,
// hashed: two processes with the same key see the same pids.
func hostKey() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + "\n" + ns))
	return hex.EncodeToString(sum[:8])
}

// procStat reads a process's state and start time (fields 3 and 22 of
// /proc/PID/stat, counted after the command name, which may hold spaces and
// parentheses).
func procStat(pid int) (state, start string, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", "", errors.New("unexpected /proc stat format")
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 {
		return "", "", errors.New("unexpected /proc stat format")
	}
	return fields[0], fields[19], nil
}
