package queue

import (
	"os"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// Telling at a glance that a Lease's writer has exited. Staleness needs a
// TTL of watching; but a writer on this host, in this pid namespace, can be
// looked up directly. Each writer stamps its Lease with a mark naming its
// host's boot and pid namespace (hashed), its pid and the time its process
// started, and a writer that finds a Lease of its own host whose process is
// gone, or whose pid now belongs to a process started at another time, may
// delete it at once. Any other Lease (another host, another pid namespace,
// a platform without /proc, an older plugin) is judged by staleness alone.

// ProcessAnnotation marks a queue Lease with the process that holds it:
// "<host>/<pid>/<start>", where host is a hash of the host's boot id and
// the pid namespace, and start is when the process started, in clock ticks
// since boot. It lets a writer of the same host see that the holder is gone
// without waiting a TTL.
const ProcessAnnotation = "kubeadmcfg.io/queue-process"

// exited reports whether l's writer has provably exited: a process of this
// host and pid namespace that no longer runs. When it cannot tell, it says
// no.
func exited(l *coordinationv1.Lease) bool {
	mark, ok := l.Annotations[ProcessAnnotation]
	return ok && processExited(mark)
}

// processMark is this process's ProcessAnnotation, or "" where its host
// cannot be told (off Linux, or without /proc).
func processMark() string {
	host := proc.LocalHost().Key()
	self := proc.Describe(os.Getpid())
	if host == "" || self.StartTicks == 0 {
		return ""
	}
	return host + "/" + strconv.Itoa(self.PID) + "/" + strconv.FormatUint(self.StartTicks, 10)
}

// processExited reports whether mark names a process of this host and pid
// namespace that has ended: its pid is gone, is a zombie, or belongs to a
// process that started at another time (the pid was reused).
func processExited(mark string) bool {
	key, rest, ok := strings.Cut(mark, "/")
	pidText, startText, ok2 := strings.Cut(rest, "/")
	host := proc.LocalHost()
	if !ok || !ok2 || key == "" || key != host.Key() {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false // never look at a process group (pid 0 or negative)
	}
	start, err := strconv.ParseUint(startText, 10, 64)
	if err != nil || start == 0 {
		return false // not a mark this plugin wrote: it cannot tell
	}
	return proc.ProcessState(proc.Identity{Host: host, PID: pid, StartTicks: start}) == proc.Ended
}
