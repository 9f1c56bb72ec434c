package engine

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Sentinels the cobra layer recognises to say which flag to check.
var (
	// ErrUnreachable: no connection to the API server.
	ErrUnreachable = errors.New("cannot reach the API server")
	// ErrUnauthorized: the server rejected the credentials.
	ErrUnauthorized = errors.New("unauthorized: the server rejected the credentials")
)

// APIError turns an error from an API call on object into a typed error with
// the exit code and a hint on what to do next.
func APIError(err error, verb, object string) error {
	if err == nil {
		return nil
	}
	var typed *exitcode.Error
	if errors.As(err, &typed) {
		return err
	}
	code := 0
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code = int(status.Status().Code)
	}
	switch {
	case apierrors.IsNotFound(err) || code == http.StatusNotFound:
		return exitcode.NotFoundf("%s not found (check the namespace, the name, and that this is a kubeadm cluster)", object)
	case apierrors.IsForbidden(err) || code == http.StatusForbidden:
		return exitcode.New(exitcode.Forbidden, fmt.Errorf("%w (grant %s on it; deploy/rbac.yaml has the minimal roles)", err, verb))
	case apierrors.IsUnauthorized(err) || code == http.StatusUnauthorized:
		return exitcode.New(exitcode.Forbidden, fmt.Errorf("%w: %w", ErrUnauthorized, err))
	case apierrors.IsConflict(err):
		return exitcode.New(exitcode.Conflict, err)
	case apierrors.IsInvalid(err), apierrors.IsRequestEntityTooLargeError(err):
		return exitcode.New(exitcode.Invalid, fmt.Errorf("the server rejected the %s: %w", object, err))
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return exitcode.Failuref("%w (is it up?): %w", ErrUnreachable, err)
	}
	return exitcode.Failuref("%s %s: %w", verb, object, err)
}

// IsRetryable reports whether an API call that failed with err may succeed
// when repeated: a write conflict, throttling, a server error or a broken
// connection. Forbidden, not found and invalid never are. An answer is judged
// by its HTTP status code, so a proxy's HTML error page (which has no
// Kubernetes Status body) is judged like the API server's own answer.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, ErrOutcomeUnknown) {
		// An unknown outcome is final: its message quotes the lost answer's
		// cause ("connection reset by peer"), which must not make it look
		// like a broken connection worth another attempt.
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}
