package kubeadmupgrade

import (
	"errors"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// PhaseError is a step that failed in Phase. Back says the node is on
// what it ran before the step (put back, or never changed by it); when it
// is not, the node stays as the failure left it, for a forward recovery
// (past the point of no return, or a kubelet step).
type PhaseError struct {
	Phase string
	Err   error
	// Output is the end of what the failed command printed, if one did.
	Output string
	// Back: the node is back on Request.From. Unchanged: it never left
	// it, since the step failed before kubeadm's control-plane phase; its
	// components were not checked.
	Back, Unchanged bool
	// EtcdKept, on a node put back, says why its etcd member was not:
	// it stays on the newer etcd release, whose data the older one may
	// not read ("" when it was put back too, or not changed). Such a node
	// is back but for its member: not as it was.
	EtcdKept string
}

func (e *PhaseError) Error() string {
	return "phase " + e.Phase + " failed: " + exitcode.Message(e.Err)
}
func (e *PhaseError) Unwrap() error { return e.Err }

// PutBackError is a failed step whose node could not be put back on what
// it ran: Failure is how the step failed, Err why the put-back did.
// Untried: the put-back was not tried, since whether the point of no
// return was past could not be told; the node stays as the failure left
// it.
type PutBackError struct {
	Failure *PhaseError
	Err     error
	Untried bool
}

func (e *PutBackError) Error() string {
	if e.Untried {
		return e.Failure.Error() + "; the node was not put back: " + exitcode.Message(e.Err)
	}
	return e.Failure.Error() + "; putting the node back failed: " + exitcode.Message(e.Err)
}

func (e *PutBackError) Unwrap() []error { return []error{e.Failure, e.Err} }

// outputError is a command that failed: its message says how, Output what
// it printed last, which the record keeps apart.
type outputError struct {
	msg, output string
	err         error
}

func (e *outputError) Error() string { return e.msg }
func (e *outputError) Unwrap() error { return e.err }

// phaseError is err as phase's failure, with the output of the command
// that failed.
func phaseError(phase string, err error) *PhaseError {
	pe := &PhaseError{Phase: phase, Err: err}
	var out *outputError
	if errors.As(err, &out) {
		pe.Output = out.output
	}
	return pe
}
