package upgrade

import "github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"

// Tail keeps the end of what a command writes, for the reason its step
// failed with: a bounded copy, whatever the command prints.
//
// Deprecated: use proc.Tail, or the tail of a child proc started.
type Tail = proc.Tail
