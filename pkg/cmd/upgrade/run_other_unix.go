//go:build !linux && !windows

package upgrade

import "github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"

// continueStopped does nothing: a command stopped with Ctrl-Z stays stopped.
// It returns no channel to wait for.
func continueStopped(*proc.Process, func()) <-chan error { return nil }
