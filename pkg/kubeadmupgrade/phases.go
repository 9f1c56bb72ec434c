package kubeadmupgrade

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
)

// The phases a step records, beside kubeadm's own (kubeadm 1.37's `upgrade
// apply|node phase --help`, in order). UploadConfig is where kubeadm would
// write the ClusterConfiguration: the step writes it through the engine
// (pkg/uploadconfig). Gate is the step's own last look at the node.
const (
	Preflight    = "preflight"
	ControlPlane = "control-plane"
	UploadConfig = "upload-config"
	KubeletPhase = "kubelet"
	Gate         = "gate"
)

// phase is one phase of a step: what it is named in the record, whether a
// step run again may start there, and what it does.
type phase struct {
	name      string
	resumable bool
	run       func(s *step, ctx context.Context, name string) error
}

// phasesOf is the table of a step of kind; nil for an unknown kind.
func phasesOf(kind Kind) []phase {
	kubeadm := (*step).kubeadmPhase
	switch kind {
	case Apply:
		return []phase{
			{Preflight, true, kubeadm},
			{ControlPlane, true, (*step).firstControlPlane},
			{UploadConfig, true, (*step).uploadConfig},
			{"kubelet-config", true, kubeadm},
			{"bootstrap-token", true, kubeadm},
			{"addon all", true, kubeadm},
			{"post-upgrade", true, kubeadm},
			{Gate, false, (*step).gate},
		}
	case Upgrade:
		return []phase{
			{Preflight, true, kubeadm},
			{ControlPlane, true, (*step).controlPlane},
			{"kubelet-config", true, kubeadm},
			{"addon all", true, kubeadm},
			{"post-upgrade", true, kubeadm},
			{Gate, false, (*step).gate},
		}
	case KubeletStep:
		return []phase{
			{KubeletPhase, true, (*step).restartKubelet},
			{Gate, false, (*step).kubeletGate},
		}
	}
	return nil
}

// step is one Run under way.
type step struct {
	node   Node
	req    Request
	rep    *Report
	config string // the UpgradeConfiguration file
	// before are kubeadm's manifest backups that were there when the step
	// began: none of them is this step's to put back.
	before []string
	// changed: kubeadm's control-plane phase ran in this step, and so may
	// have replaced manifests.
	changed bool
	// settled: the components were seen at the target, settled, after the
	// control-plane phase.
	settled bool
	// uploading: the upload-config phase began in this step, and so may
	// have written kubeadm-config, whatever its answer said.
	uploading bool
	// etcdCluster is the node's etcd cluster, as its local member sees it
	// now; nil, with no error, on a node without a local member.
	etcdCluster func(ctx context.Context) (*etcd.Cluster, error)
}

// newStep is a Run of req on n about to begin.
func newStep(n Node, req Request) *step {
	s := &step{node: n, req: req, rep: &Report{NoReturn: req.NoReturn}}
	s.etcdCluster = func(ctx context.Context) (*etcd.Cluster, error) {
		client, err := n.EtcdClient()
		if err != nil || client == nil {
			return nil, err
		}
		defer client.Close()
		return client.Cluster(ctx)
	}
	return s
}

var errInterrupted = errors.New("interrupted: the agent was told to stop")

// run runs phases in order, each announced first but the one the step
// starts at; it returns the first failure.
func (s *step) run(ctx context.Context, phases []phase) *PhaseError {
	if s.req.Kind != KubeletStep {
		config, err := s.writeConfig()
		if err != nil {
			return &PhaseError{Phase: phases[0].name, Err: err}
		}
		s.config = config
	}
	for i, p := range phases {
		if i > 0 && s.req.Phase != nil {
			if err := s.req.Phase(p.name); err != nil {
				return &PhaseError{Phase: p.name, Err: err}
			}
		}
		if ctx.Err() != nil {
			return &PhaseError{Phase: p.name, Err: errInterrupted}
		}
		s.rep.Phases = append(s.rep.Phases, p.name)
		if err := p.run(s, ctx, p.name); err != nil {
			return phaseError(p.name, err)
		}
	}
	return nil
}

// kubeadmPhase runs kubeadm's phase name.
func (s *step) kubeadmPhase(ctx context.Context, name string) error {
	return s.kubeadm(ctx, s.args(name)...)
}

// firstControlPlane takes a snapshot of the node's etcd member into its
// backup store before the first node's control plane, and etcd with it,
// is upgraded (etcd data is never rolled back by copying, but it can be
// restored from this), then runs the control-plane phase.
func (s *step) firstControlPlane(ctx context.Context, name string) error {
	if err := s.snapshot(ctx); err != nil {
		return err
	}
	return s.controlPlane(ctx, name)
}

// controlPlane runs kubeadm's control-plane phase, then checks the node's
// components. kubeadm's own wait after a component's new manifest ends
// once the mirror Pod has the new hash and is Running, which a component
// that keeps exiting is between its restarts; on the first node this comes
// before upload-config, after which a failure is only recovered forward.
func (s *step) controlPlane(ctx context.Context, name string) error {
	s.changed = true
	if err := s.kubeadmPhase(ctx, name); err != nil {
		return err
	}
	if err := s.checkControlPlane(ctx, 0); err != nil {
		return err
	}
	s.settled = true
	return nil
}

// gate is the step's last look: the node's control plane runs the target,
// healthy, and its etcd member is back in a healthy cluster; only then may
// the next node begin. The phases after control-plane touch no static Pod:
// once the components were seen settled after it, one healthy look at
// each is enough here.
func (s *step) gate(ctx context.Context, _ string) error {
	settle := time.Duration(0)
	if s.settled {
		settle = -1
	}
	if err := s.checkControlPlane(ctx, settle); err != nil {
		return err
	}
	s.emit(false, "UpgradeStep", "node %s runs %s on every component, healthy", s.node.Name, s.req.Version)
	return nil
}

// snapshot takes the etcd snapshot; nothing on a node without a local
// member.
func (s *step) snapshot(ctx context.Context) error {
	client, err := s.node.EtcdClient()
	if err != nil || client == nil {
		return err
	}
	defer client.Close()
	snap, err := client.Snapshot(ctx, s.node.Store, etcd.SnapshotOptions{Node: s.node.Name, Keep: s.keep()})
	if err != nil {
		return fmt.Errorf("the etcd snapshot before the upgrade: %w", err)
	}
	s.emit(false, "UpgradeStep", "node %s: etcd snapshot before the upgrade: %s (%d bytes, revision %d)", s.node.Name, snap.Name, snap.Size, snap.Revision)
	return nil
}

// emit hands an event to Progress.
func (s *step) emit(warning bool, reason, format string, args ...any) {
	if s.req.Progress != nil {
		s.req.Progress(Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
}
