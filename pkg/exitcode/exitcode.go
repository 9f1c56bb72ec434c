// Package exitcode defines the plugin's exit-code contract and the typed
// errors that carry a code, so that every command reports failures the same
// way and main maps an error to a code in exactly one place.
package exitcode

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Code is a process exit status with a documented meaning.
type Code int

// The exit codes every command uses. The README documents them.
const (
	OK        Code = 0 // success, including "unchanged" and "skipped"
	Failure   Code = 1 // any other error: API unreachable, I/O
	Usage     Code = 2 // bad flag, argument, path, unparsable value or patch
	Invalid   Code = 3 // a document or backup that fails validation
	Conflict  Code = 4 // conflict or precondition not met
	NotFound  Code = 5 // ConfigMap, key, lease, backup or upgrade not found
	Forbidden Code = 6 // forbidden or unauthorized
	// OutcomeUnknown: a write was sent, its answer was lost, and whether it
	// landed could not be found out. Retrying blindly could apply it twice.
	OutcomeUnknown Code = 7

	// RolledBack: reconfigure failed and put this node's previous
	// control-plane manifests back, and they came up healthy again.
	RolledBack Code = 8
	// RollbackFailed: reconfigure failed and so did its rollback; a
	// control-plane component of this node may be down.
	RollbackFailed Code = 9
	// Internal: the plugin panicked, which is a bug. The panic is
	// recovered, in the main goroutine and in every goroutine the plugin
	// starts, so that it never ends the process with Go's own exit 2, the
	// usage code.
	Internal Code = 10

	// OutOfSync is no failure: `nodes --exit-code` found a control-plane
	// node not known to run the live kubeadm-config document (out of sync,
	// or unknown), as `git diff --exit-code` exits 1 on a difference.
	OutOfSync Code = 11
)

// Error is an error that knows the exit code it should end the process with.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// New wraps err with code; a nil err stays nil.
func New(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Quiet is an exit status that is no failure: the process exits with code
// and prints no error line, as `git diff --exit-code` says nothing more
// than its output and its status.
func Quiet(code Code) error { return &Error{Code: code, Err: quiet{}} }

type quiet struct{}

func (quiet) Error() string { return "" }

// Usagef reports a usage error: the command line cannot be acted on.
func Usagef(format string, a ...any) error { return New(Usage, fmt.Errorf(format, a...)) }

// Invalidf reports a document that fails validation.
func Invalidf(format string, a ...any) error { return New(Invalid, fmt.Errorf(format, a...)) }

// Conflictf reports a conflict or a precondition that does not hold.
func Conflictf(format string, a ...any) error { return New(Conflict, fmt.Errorf(format, a...)) }

// NotFoundf reports that something the command needs does not exist.
func NotFoundf(format string, a ...any) error { return New(NotFound, fmt.Errorf(format, a...)) }

// Failuref reports any other failure.
func Failuref(format string, a ...any) error { return New(Failure, fmt.Errorf(format, a...)) }

// WithHint appends what to do to err's message and keeps its exit code:
// domain packages say what is wrong, the cobra layer adds the flag that
// fixes it.
func WithHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return &Error{Code: FromError(err), Err: fmt.Errorf("%w; %s", err, hint)}
}

// FromError returns the exit code for err. Typed errors win; API status
// errors that reach main unwrapped are mapped by their reason.
func FromError(err error) Code {
	if err == nil {
		return OK
	}
	var typed *Error
	if errors.As(err, &typed) {
		return typed.Code
	}
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return Forbidden
	case apierrors.IsNotFound(err):
		return NotFound
	case apierrors.IsConflict(err):
		return Conflict
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return Invalid
	}
	return Failure
}

// Message renders err as the single line the plugin prints on stderr: an API
// error's long body or a multi-line cause is folded so scripts can rely on
// one line per failure.
func Message(err error) string {
	msg := strings.TrimSpace(err.Error())
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	return msg
}
