// Package kubeadmupgrade is the node action of one step of a Kubernetes
// upgrade, as pkg/reconfigure is the node action of a reconfiguration: a
// control-plane node's `kubeadm upgrade apply` (the first node) or
// `kubeadm upgrade node` (every other), run with the node's own kubeadm of
// the target release phase by phase, or its kubelet step. Run takes the
// node and one Request and returns a Report, or a typed error that says
// how the node ended: a PhaseError (the node is put back, or stays for a
// forward recovery) or a PutBackError.
//
// Each phase is announced to Request.Phase before it runs, so that the
// caller records where the node stands; a step run again (a resume, an
// earlier agent's step taken over) starts at the phase it stopped in.
// Before kubeadm-config says the target (the first node's upload-config
// phase: the point of no return), a failed control-plane node is put back
// on what it ran, from the manifest backup kubeadm made in this very run;
// after it, the node is left for upgrade-resume to take forward. Whether
// kubeadm-config says the target is read again before a put-back: a write
// whose answer was lost may have landed. An etcd member is put back only
// while another member of its cluster still runs the release it goes back
// to. A step holds the node's manifests directory (controlplane.Lock) from
// its first phase to its end, as a reconfiguration does.
package kubeadmupgrade

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// Node is a control-plane node as an upgrade step sees it: the node every
// reconfiguration sees (its engine reads kubeadm-config, its mirror Pods
// and its Node; its Store takes the etcd snapshot), and what an upgrade
// needs besides.
type Node struct {
	reconfigure.Node
	Env
}

// Env is what an upgrade needs of a node besides what every run on it
// does: the kubeadm of each release, the kubelet's restart, and kubeadm's
// own settings. It is built once, where the agent starts.
type Env struct {
	Kubeadms Kubeadms
	Kubelet  Kubelet
	// IgnorePreflightErrors are kubeadm's preflight checks the node's
	// steps ignore (kubeadm's --ignore-preflight-errors).
	IgnorePreflightErrors []string
	// KeepBackups is how many of each kind of backup directory kubeadm
	// leaves in /etc/kubernetes/tmp are kept after a step, and how many of
	// the node's etcd snapshots in its Store (DefaultKeepBackups when 0).
	KeepBackups int
	// ConfigWriter writes kubeadm-config at the first node's upload-config
	// phase: an engine of its own, whose backup says why it was taken
	// (backup.ReasonBeforeUpgrade) and whose validation refuses what
	// `validate` refuses (engine.ValidationStrict), unlike the agent's
	// engine for putting a tried document back. Nil writes with
	// Node.Config.
	ConfigWriter *engine.Engine
}

// DefaultKeepBackups is how many of each kind of backup directory kubeadm
// leaves in /etc/kubernetes/tmp are kept: every kubeadm upgrade leaves a
// copy of the manifests, and on a stacked node of the whole etcd data
// directory.
const DefaultKeepBackups = 3

// Kind is the kind of a node's step.
type Kind string

const (
	// Apply is the first control-plane node's `kubeadm upgrade apply`.
	Apply Kind = "apply"
	// Upgrade is every other control-plane node's `kubeadm upgrade node`.
	Upgrade Kind = "node"
	// KubeletStep installs and restarts the node's kubelet of the target.
	KubeletStep Kind = "kubelet"
)

// Request is one step on the node.
type Request struct {
	Kind Kind
	// Version is the target release, From what the node ran before: a
	// failed node is put back on it.
	Version, From string
	// StartPhase is the phase the step starts at: a step run again starts
	// at the phase it stopped in. "" or a phase the step does not run
	// again (the gate) is its first phase.
	StartPhase string
	// NoReturn says that kubeadm-config already says Version: the first
	// node's point of no return is past, and a failure is recovered
	// forward. Run finds it itself once it writes kubeadm-config.
	NoReturn bool
	// Wait is how long each component, and the kubelet, may take to come
	// up healthy; it is also kubeadm's own upgradeManifests timeout. The
	// kubelet's restart command has a bound of its own
	// (Kubelet.RestartTimeout).
	Wait time.Duration
	// Phase is called before each phase after StartPhase runs (the caller
	// records StartPhase as it begins the step): an error stops the step
	// there, as a failure of that phase.
	Phase func(phase string) error
	// Started is called with the identity of each child the step starts
	// (kubeadm, the kubelet's restart command), so that whoever comes
	// later on the node can tell whether it still runs.
	Started func(proc.Identity)
	// Progress receives what the step does; nil discards it.
	Progress func(Event)
}

// Event is one thing a step did or found.
type Event struct {
	Warning bool
	// Reason is a CamelCase word: UpgradePhase, Kubeadm, PuttingBack,
	// Housekeeping, UpgradeStep.
	Reason, Message string
	// Component is a component's health, as a reconfiguration reports
	// it, when the event is one.
	Component *controlplane.Event
}

// Report is what a step did.
type Report struct {
	// Phases are the phases run, in order, the gate included.
	Phases []string
	// NoReturn says that kubeadm-config says the target now.
	NoReturn bool
}

// Run runs req's step on node n, phase by phase from req.StartPhase, then
// the gate, and returns what it did. A failure is a *PhaseError; when the
// node could not be put back, a *PutBackError. The Report is returned
// with both.
//
// The step holds the node's manifests directory (controlplane.Lock, the
// lock a reconfiguration and the agent's kubeconfig renewal take) from
// before its first phase until it returns: a step that cannot take it
// fails in its first phase, having changed nothing.
func Run(ctx context.Context, n Node, req Request) (*Report, error) {
	table := phasesOf(req.Kind)
	if table == nil {
		return nil, errors.New("kubeadmupgrade: unknown step kind " + string(req.Kind))
	}
	s := newStep(n, req)
	return s.rep, s.do(ctx, table[startIndex(table, req.StartPhase):])
}

// do runs phases under the manifests directory's lock, ends a failure
// (recover), and keeps house.
func (s *step) do(ctx context.Context, phases []phase) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return s.recover(ctx, &PhaseError{Phase: phases[0].name, Err: err})
	}
	defer unlock()
	s.before = manifestBackups(s.node.tmpDir())
	if failure := s.run(ctx, phases); failure != nil {
		err = s.recover(context.WithoutCancel(ctx), failure)
	}
	if s.req.Kind != KubeletStep {
		s.prune() // after the put-back, which reads this step's backup
	}
	return err
}

// lock takes the node's manifests directory, waiting up to Wait while
// another run holds it.
func (s *step) lock(ctx context.Context) (func(), error) {
	deadline := time.Now().Add(s.req.Wait)
	for said := false; ; said = true {
		unlock, err := controlplane.Lock(s.node.ManifestsDir)
		var busy *controlplane.BusyError
		if !errors.As(err, &busy) {
			return unlock, err
		}
		if !said {
			s.emit(true, "UpgradeStep", "node %s: another run holds %s (a reconfigure, or the renewal of the agent's kubeconfig): the step waits up to %s for it to end", s.node.Name, busy.Dir, s.req.Wait)
		}
		if !time.Now().Add(time.Second).Before(deadline) {
			return nil, exitcode.Conflictf("another run held the manifests directory %s for %s (a reconfigure, or the renewal of the agent's kubeconfig); nothing was changed", busy.Dir, s.req.Wait)
		}
		select {
		case <-ctx.Done():
			return nil, errInterrupted
		case <-time.After(time.Second):
		}
	}
}

// Phases are the phases of a step of kind, in order, as Request.Phase
// names them and Request.StartPhase takes them; the gate last.
func Phases(kind Kind) []string {
	var names []string
	for _, p := range phasesOf(kind) {
		names = append(names, p.name)
	}
	return names
}

// startIndex is where a step starting at phase starts in table.
func startIndex(table []phase, start string) int {
	i := slices.IndexFunc(table, func(p phase) bool { return p.name == start && p.resumable })
	return max(i, 0)
}

// StartPhase is the phase a step of kind that stopped in phase starts at
// when run again: that phase, or the step's first when it cannot start
// there (the gate: the phases before it run again).
func StartPhase(kind Kind, phase string) string {
	table := phasesOf(kind)
	if len(table) == 0 {
		return ""
	}
	return table[startIndex(table, phase)].name
}

// ResumePhase is the phase the step of kind to version that stopped in
// phase stopped starts at when run again on node n: StartPhase, except that a
// first node whose manifests do not name version (put back after
// kubeadm-config came to say it, by a write whose answer was lost or an
// agent stopped between the write and its answer) starts at the
// control-plane phase, not after it: the phases after it would roll the
// target's addons out over the older control plane.
func ResumePhase(n Node, kind Kind, stopped, version string) string {
	start := StartPhase(kind, stopped)
	if kind != Apply {
		return start
	}
	table := phasesOf(kind)
	at := func(name string) int { return slices.IndexFunc(table, func(p phase) bool { return p.name == name }) }
	if at(start) <= at(ControlPlane) || manifestsName(n, version) {
		return start
	}
	return ControlPlane
}

// manifestsName reports whether the manifest of every component of the
// node but etcd (whose release is its own) names version as its image's
// tag: kubeadm's control-plane phase wrote them for version.
func manifestsName(n Node, version string) bool {
	for _, c := range n.ComponentsOnNode() {
		if c == controlplane.Etcd {
			continue
		}
		m, err := controlplane.ReadManifest(filepath.Join(n.ManifestsDir, c.File()))
		if err != nil || controlplane.ImageTag(m.Pod.Spec.Containers[0].Image) != version {
			return false
		}
	}
	return true
}
