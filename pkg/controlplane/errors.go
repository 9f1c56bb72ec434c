package controlplane

import (
	"fmt"
	"strings"
	"time"
)

// BusyError is another reconfiguration holding the manifests directory.
type BusyError struct{ Dir string }

func (e *BusyError) Error() string {
	return fmt.Sprintf("another reconfigure is running on %s; wait for it to end", e.Dir)
}

// MissingError is a component without a manifest on this node.
type MissingError struct {
	Component Component
	Path      string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("no %s manifest at %s (is this a control-plane node?)", e.Component.PodName(), e.Path)
}

// NoMirrorPodError is a component whose mirror Pod is not in the API:
// without its config hash there is no telling when the kubelet runs a new
// manifest. The node name that names the mirror Pods may be wrong, which
// only the caller can say how to fix.
type NoMirrorPodError struct {
	// Pod is the mirror Pod looked for, as namespace/name.
	Pod string
}

func (e *NoMirrorPodError) Error() string {
	return fmt.Sprintf("no mirror Pod %s: without it there is no telling when the kubelet runs a new manifest", e.Pod)
}

// UnhealthyError is a component that did not come up healthy in time.
type UnhealthyError struct {
	Component Component
	Wait      time.Duration
	// Last is what was last seen: the probe's error, or the mirror Pod's
	// state.
	Last string
}

func (e *UnhealthyError) Error() string {
	return fmt.Sprintf("%s did not become healthy within %s (%s)", e.Component.PodName(), e.Wait, e.Last)
}

// CrashLoopError is a component the kubelet reports crashing with its new
// manifest: there is no point waiting any longer.
type CrashLoopError struct {
	Component Component
	Restarts  int32
	ExitCode  int32
}

func (e *CrashLoopError) Error() string {
	return fmt.Sprintf("%s keeps exiting with its new manifest (exit code %d, %d restarts by the kubelet)", e.Component.PodName(), e.ExitCode, e.Restarts)
}

// FailedError is a reconfiguration that failed and was rolled back: the
// previous manifests of every component it changed are back and healthy.
type FailedError struct {
	// Err is why the reconfiguration failed.
	Err        error
	RolledBack []Component
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%v; rolled back %s: the node is back on its previous configuration", e.Err, podNames(e.RolledBack))
}

func (e *FailedError) Unwrap() error { return e.Err }

// RollbackError is a reconfiguration that failed, and whose rollback did
// not bring every component back healthy: Down may be down.
type RollbackError struct {
	Err error
	// Down are the components whose previous manifest did not come back
	// healthy; RollbackErr says why.
	Down        []Component
	RollbackErr error
}

func (e *RollbackError) Error() string {
	return fmt.Sprintf("%v; the rollback failed: %s may be down: %v", e.Err, podNames(e.Down), e.RollbackErr)
}

func (e *RollbackError) Unwrap() error { return e.Err }

// NotRolledBackError is a failed reconfiguration left as it is, because
// rollback was turned off.
type NotRolledBackError struct {
	Err     error
	Changed []Component
}

func (e *NotRolledBackError) Error() string {
	return fmt.Sprintf("%v; not rolled back, as asked: the new manifests of %s stay in place", e.Err, podNames(e.Changed))
}

func (e *NotRolledBackError) Unwrap() error { return e.Err }

func podNames(cs []Component) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.PodName()
	}
	return strings.Join(names, ", ")
}
