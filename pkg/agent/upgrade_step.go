package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// A node's control-plane step of an upgrade: kubeadm upgrade apply (the
// first node) or kubeadm upgrade node (every other), phase by phase, each
// recorded before it runs; then the node's gate; then its outcome.

// The phases of kubeadm 1.37's `upgrade apply` and `upgrade node`, in
// order (`kubeadm upgrade apply|node phase --help`). uploadConfig is where
// kubeadm would write the ClusterConfiguration: the agent writes it itself.
const (
	phasePreflight    = "preflight"
	phaseControlPlane = "control-plane"
	phaseUploadConfig = "upload-config"
	phaseKubelet      = "kubelet"
	phaseGate         = "gate"
)

var (
	applyPhases = []string{phasePreflight, phaseControlPlane, phaseUploadConfig, "kubelet-config", "bootstrap-token", "addon all", "post-upgrade"}
	nodePhases  = []string{phasePreflight, phaseControlPlane, "kubelet-config", "addon all", "post-upgrade"}
)

// stepRun is one control-plane step under way on the node.
type stepRun struct {
	w       *upgrades
	rec     *upgradestate.Record
	turn    upgradestate.Turn
	runner  upgradestate.Runner
	version string // the target
	from    string // what the node ran before
	command string // apply or node
	config  string // the UpgradeConfiguration file
	// noReturn says that kubeadm-config holds the target: from there, a
	// failure is recovered forward (upgrade-resume), never put back.
	noReturn bool
}

// controlPlane runs the node's control-plane step: it begins the run (or
// takes the earlier agent's over), runs kubeadm's phases from where the
// step stands, checks the node, and records the outcome.
func (w *upgrades) controlPlane(ctx context.Context, rec *upgradestate.Record, turn upgradestate.Turn) error {
	a := w.a
	s := &stepRun{w: w, rec: rec, turn: turn, version: rec.ToVersion, from: rec.FromVersion, command: "node"}
	if turn.Apply {
		s.command = "apply"
	}
	phases := nodePhases
	if turn.Apply {
		phases = applyPhases
	}
	noReturn, err := w.documentSays(ctx, s.version)
	if err != nil {
		w.wait("node %s waits to run %s: %s", a.cfg.Name, turn.Step, exitcode.Message(err))
		return err
	}
	s.noReturn = noReturn
	start := s.startPhase(phases)
	rn, err := w.begin(ctx, rec, string(turn.Step), "", turn.Lost, start)
	if err != nil {
		return err
	}
	s.runner = rn
	a.info("UpgradeStep", "node %s runs %s: kubeadm upgrade %s %s, from phase %s", a.cfg.Name, turn.Step, s.command, s.version, start)
	var failure *phaseError
	a.job(ctx, func(jctx, wctx context.Context) {
		hb := w.heartbeat(wctx, rn)
		defer func() {
			if hb != nil {
				hb.Stop()
			}
		}()
		failure = s.run(jctx, wctx, phases[slices.Index(phases, start):])
		s.end(wctx, failure)
	})
	w.waiting = ""
	prune(a, w.tmpDir())
	return nil
}

// startPhase is where the step starts: at its beginning, or, for a step
// run again (a resume, an earlier agent's step taken over), at the phase
// it stopped in; a first node that was put back starts over.
func (s *stepRun) startPhase(phases []string) string {
	if !s.turn.Retry && s.turn.Lost == nil {
		return phases[0]
	}
	if s.turn.Apply && !s.noReturn {
		return phases[0]
	}
	for _, n := range s.rec.Agents.Nodes {
		if n.Node == s.w.a.cfg.Name && slices.Contains(phases, n.Phase) {
			return n.Phase
		}
	}
	return phases[0]
}

// begin moves the upgrade (or, with host, the node) into step as this
// agent's run, or takes over the run of an earlier agent of the node
// (lost), in one write with the phase it starts at.
func (w *upgrades) begin(ctx context.Context, rec *upgradestate.Record, step, host string, lost *upgradestate.Runner, phase string) (upgradestate.Runner, error) {
	a := w.a
	procs := upgradestate.LocalProcesses()
	run := upgradestate.Run{ID: a.cfg.Identity, Step: step, Host: host, Interval: heartbeatInterval,
		Command: "kubeadm upgrade (agent " + a.cfg.Identity + ")", Leases: a.cfg.Upgrade.HeartbeatNames(), Check: procs.Check}
	var rn upgradestate.Runner
	cm, err := w.update(ctx, func(rec *upgradestate.Record) (bool, error) {
		var err error
		if lost != nil {
			rn, err = rec.TakeOver(w.clock(), lost.ID, run)
		} else {
			rn, err = rec.BeginRun(w.clock(), run)
		}
		if err != nil {
			return false, err
		}
		rec.Agents.BeginPhase(w.clock(), a.cfg.Name, step, phase)
		return true, nil
	})
	if err != nil {
		var live *upgradestate.LiveCommandError
		if errors.As(err, &live) {
			w.wait("node %s waits for the kubeadm an earlier agent started (pid %d) to end before it runs %s again", a.cfg.Name, live.Runner.PID, step)
		} else {
			w.wait("node %s cannot begin %s yet: %s", a.cfg.Name, step, exitcode.Message(err))
		}
		return rn, err
	}
	what := "begins"
	if lost != nil {
		what = "takes over from " + lost.ID
	}
	a.upgradeEvent(ctx, cm, false, "UpgradeStepStarted", fmt.Sprintf("node %s %s %s, from phase %s", a.cfg.Name, what, step, phase))
	return rn, nil
}

// phaseError is a phase that failed, with what kubeadm said.
type phaseError struct {
	phase  string
	err    error
	output string
}

func (e *phaseError) Error() string {
	return "phase " + e.phase + " failed: " + exitcode.Message(e.err)
}

// run runs phases in order, each recorded first, then the gate; it
// returns the first failure.
func (s *stepRun) run(jctx, wctx context.Context, phases []string) *phaseError {
	w, a := s.w, s.w.a
	config, err := s.w.writeConfig(s.version)
	if err != nil {
		return &phaseError{phase: phases[0], err: err}
	}
	s.config = config
	settled := false // the components were seen at the target, settled, after control-plane
	for i, phase := range phases {
		if i > 0 {
			if err := s.recordPhase(wctx, phase); err != nil {
				return &phaseError{phase: phase, err: err}
			}
		}
		if err := jctx.Err(); err != nil {
			return &phaseError{phase: phase, err: errors.New("interrupted: the agent was told to stop")}
		}
		if phase == phaseControlPlane && s.turn.Apply {
			if err := s.snapshot(jctx); err != nil {
				return &phaseError{phase: phase, err: err}
			}
		}
		if phase == phaseUploadConfig {
			if out, err := w.uploadConfig(jctx, s); err != nil {
				return &phaseError{phase: phase, err: err, output: out}
			}
			s.noReturn = true
			continue
		}
		if out, err := w.kubeadm(jctx, s.version, s.runner.ID, s.phaseArgs(phase)...); err != nil {
			return &phaseError{phase: phase, err: err, output: out}
		}
		// kubeadm's own wait after a component's new manifest ends once
		// the mirror Pod has the new hash and is Running, which a
		// component that keeps exiting is between its restarts. The
		// node's components are checked here: on the first node this
		// comes before upload-config, after which a failure is only
		// recovered forward.
		if phase == phaseControlPlane {
			if err := w.gate(jctx, s.version, 0); err != nil {
				return &phaseError{phase: phase, err: err}
			}
			settled = true
		}
	}
	if err := s.recordPhase(wctx, phaseGate); err != nil {
		return &phaseError{phase: phaseGate, err: err}
	}
	// The phases after control-plane touch no static Pod: once the
	// components were seen settled after it, one healthy look at each is
	// enough here.
	settle := time.Duration(0)
	if settled {
		settle = -1
	}
	if err := w.gate(jctx, s.version, settle); err != nil {
		return &phaseError{phase: phaseGate, err: err}
	}
	a.info("UpgradeStep", "node %s runs %s on every component, healthy", a.cfg.Name, s.version)
	return nil
}

// phaseArgs are kubeadm's arguments for phase: every phase takes the
// UpgradeConfiguration; those that render manifests or the kubelet's
// configuration take the node's patches; apply's preflight takes --yes, as
// it asks otherwise. kubeadm refuses a flag a phase does not know.
func (s *stepRun) phaseArgs(phase string) []string {
	args := append([]string{"upgrade", s.command, "phase"}, strings.Fields(phase)...)
	args = append(args, "--config", s.config)
	switch phase {
	case phaseControlPlane, "kubelet-config", "addon all":
		if p := s.w.a.cfg.PatchesDir; p != "" {
			args = append(args, "--patches", p)
		}
	case phasePreflight:
		if s.command == "apply" {
			args = append(args, "--yes")
		}
	}
	return args
}

// recordPhase records that the node runs phase now.
func (s *stepRun) recordPhase(ctx context.Context, phase string) error {
	w := s.w
	_, err := w.update(ctx, func(rec *upgradestate.Record) (bool, error) {
		if rec.RunnerByID(s.runner.ID) == nil {
			return false, exitcode.Conflictf("the step is no longer this agent's: someone moved it (the upgrade is in %s)", rec.State)
		}
		rec.Agents.BeginPhase(w.clock(), w.a.cfg.Name, s.runnerStep(), phase)
		return true, nil
	})
	if err == nil {
		w.a.info("UpgradePhase", "node %s: %s: phase %s", w.a.cfg.Name, s.runnerStep(), phase)
	}
	return err
}

func (s *stepRun) runnerStep() string { return s.runner.State }

// snapshot takes a snapshot of the node's etcd member into its backup
// store before the first node's control plane, and etcd with it, is
// upgraded: etcd data is never rolled back by copying, but it can be
// restored from this.
func (s *stepRun) snapshot(ctx context.Context) error {
	a := s.w.a
	client, err := a.etcdClient()
	if err != nil || client == nil {
		return err
	}
	defer client.Close()
	snap, err := client.Snapshot(ctx, a.cfg.Store, etcd.SnapshotOptions{Node: a.cfg.Name})
	if err != nil {
		return fmt.Errorf("the etcd snapshot before the upgrade: %w", err)
	}
	a.info("UpgradeStep", "node %s: etcd snapshot before the upgrade: %s (%d bytes, revision %d)", a.cfg.Name, snap.Name, snap.Size, snap.Revision)
	return nil
}

// end records the step's outcome. Before kubeadm-config says the new
// version (the first node's point of no return), a failed node is put
// back on what it ran: kubeadm puts its manifests back when a component
// does not come up; the agent checks, and puts back what kubeadm left
// from its manifest backups. After it, recovery is forward: the node stays
// as it is, and upgrade-resume runs the failed phase again.
func (s *stepRun) end(ctx context.Context, failure *phaseError) {
	w, a := s.w, s.w.a
	ok, outcome, reason := failure == nil, upgradestate.NodeDone, fmt.Sprintf("upgrade-apply: node %s runs %s", a.cfg.Name, s.version)
	if failure != nil {
		outcome = upgradestate.NodeFailed
		why := exitcode.Message(failure.err)
		if !s.noReturn {
			if err := w.putBack(ctx, s.from); err != nil {
				outcome, why = upgradestate.NodeRollbackFailed, why+"; putting the node back on "+s.from+" failed: "+exitcode.Message(err)
			} else {
				outcome, why = upgradestate.NodeRolledBack, why+"; the node is back on "+s.from
			}
		}
		reason = upgradestate.PhaseFailure(a.cfg.Name, s.runnerStep(), failure.phase, why, failure.output)
	}
	cm, err := w.update(ctx, func(rec *upgradestate.Record) (bool, error) {
		if _, err := rec.EndRun(w.clock(), s.runner.ID, ok, reason); err != nil {
			return false, err
		}
		rec.Agents.EndNode(a.cfg.Name, outcome, reason)
		return true, nil
	})
	if err != nil {
		a.warn("UpgradeNotRecorded", "node %s: %s ended %s, but the record could not say so: %s", a.cfg.Name, s.runnerStep(), outcome, exitcode.Message(err))
		return
	}
	a.upgradeEvent(ctx, cm, !ok, "UpgradeStep"+outcome, reason)
	a.state.changed()
}

// documentSays reports whether kubeadm-config's ClusterConfiguration
// already says version: the first node's point of no return is past.
func (w *upgrades) documentSays(ctx context.Context, version string) (bool, error) {
	raw, err := w.a.cfg.Config.Document(ctx)
	if err != nil {
		return false, err
	}
	doc, err := clusterconfig.Parse([]byte(raw))
	if err != nil {
		return false, err
	}
	return doc.KubernetesVersion() == version, nil
}

// putBack puts the node's control plane back on version, from kubeadm's
// newest manifest backup, unless it runs it healthy already (kubeadm put
// it back itself).
func (w *upgrades) putBack(ctx context.Context, version string) error {
	a := w.a
	components := a.components()
	if err := controlplane.WaitVersion(ctx, a.cfg.ManifestsDir, components, version, a.gateOptions(min(a.cfg.Wait, gateQuick))); err == nil {
		return nil
	}
	dirs, _ := filepath.Glob(filepath.Join(w.tmpDir(), "kubeadm-backup-manifests-*"))
	if len(dirs) == 0 {
		return fmt.Errorf("kubeadm left no manifest backup in %s to put back", w.tmpDir())
	}
	slices.Sort(dirs)
	newest := dirs[len(dirs)-1]
	manifests := map[controlplane.Component][]byte{}
	for _, c := range components {
		data, err := os.ReadFile(filepath.Join(newest, c.File()))
		if errors.Is(err, os.ErrNotExist) {
			continue // kubeadm did not replace it
		}
		if err != nil {
			return err
		}
		manifests[c] = data
	}
	a.warn("PuttingBack", "node %s: putting its control plane back on %s from kubeadm's backup %s", a.cfg.Name, version, newest)
	if _, err := reconfigure.PutBack(ctx, a.cfg.Node, reconfigure.PutBackRequest{Manifests: manifests, Wait: a.cfg.Wait, Progress: a.progress}); err != nil {
		return err
	}
	return controlplane.WaitVersion(ctx, a.cfg.ManifestsDir, components, version, a.gateOptions(a.cfg.Wait))
}

// gate waits until the node's control plane runs version, healthy, and
// its etcd member is back in a healthy cluster: only then may the next
// node begin. settle is how long each component's probe must keep
// answering (controlplane.Options.Settle: 0 its default, negative one
// answer).
func (w *upgrades) gate(ctx context.Context, version string, settle time.Duration) error {
	a := w.a
	opts := a.gateOptions(a.cfg.Wait)
	opts.Settle = settle
	if err := controlplane.WaitVersion(ctx, a.cfg.ManifestsDir, a.components(), version, opts); err != nil {
		return err
	}
	client, err := a.etcdClient()
	if err != nil || client == nil {
		return err
	}
	defer client.Close()
	cl, err := client.Cluster(ctx)
	if err != nil {
		return err
	}
	m, ok := cl.LocalMember()
	if !ok {
		return fmt.Errorf("the cluster does not list this node's etcd member")
	}
	if why := etcd.CheckBack(cl, m, etcd.DefaultMaxLag); why != "" {
		return fmt.Errorf("etcd member %s: %s", m, why)
	}
	return nil
}

// gateQuick bounds the look at whether kubeadm put a failed node back.
const gateQuick = time.Minute

// components are the node's components, its local etcd member included.
func (a *Agent) components() []controlplane.Component {
	cs := controlplane.Components()
	if _, err := os.Stat(filepath.Join(a.cfg.ManifestsDir, controlplane.Etcd.File())); err == nil {
		cs = append(cs, controlplane.Etcd)
	}
	return cs
}

// gateOptions are controlplane's options for a look at the node's
// components.
func (a *Agent) gateOptions(wait time.Duration) controlplane.Options {
	return controlplane.Options{Node: a.cfg.Name, Pods: a.cfg.Config, Wait: wait,
		Progress: func(e controlplane.Event) {
			a.progress(reconfigure.Event{Kind: reconfigure.EventComponent, Component: e})
		}}
}

// etcdClient is a client of the node's local etcd member, with its
// certificate; nil on a node without one.
func (a *Agent) etcdClient() (*etcd.Client, error) {
	path := filepath.Join(a.cfg.ManifestsDir, controlplane.Etcd.File())
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	endpoints, err := etcd.LocalEndpoints(path)
	if err != nil {
		return nil, err
	}
	certs := a.cfg.CertificatesDir
	if certs == "" {
		certs = etcd.DefaultCertificatesDir
	}
	creds, err := etcd.FindCredentials(certs)
	if err != nil {
		return nil, err
	}
	return etcd.New(etcd.Config{Endpoints: endpoints, Credentials: creds})
}
