package queue

import (
	coordinationv1 "k8s.io/api/coordination/v1"
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
