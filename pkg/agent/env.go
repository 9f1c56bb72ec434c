package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// env is what a work needs, and all it reaches: the agent builds one for
// each pass and hands it to every work. A work keeps its own state; what
// it must tell another work goes through a func here, never a pointer
// back to the agent.
type env struct {
	// cfg is the node's configuration: the node, its engines and the
	// server's clock (cfg.Clock), and the agent's settings.
	cfg *Config
	// view is the newest copy of each ConfigMap the agent follows; a work
	// that writes one puts the copy it wrote here.
	view *View
	// configSeen says kubeadm-config was read once (view.Config is nil
	// when it does not exist).
	configSeen bool
	// log is the agent's log, and the Events it records.
	log *logger
	// lease is the node's Lease, which the agent holds while it runs.
	lease *engine.HeldLease
	// holds says whether the agent may act on its node now, and job runs
	// a piece of work on the node under the agent's rules (Agent.holds,
	// Agent.job).
	holds func() bool
	job   func(ctx context.Context, fn func(jctx, wctx context.Context))
	// nodeState is the node's state as the states work found it last
	// (nil: not yet), and stateChanged tells it the node changed.
	nodeState    func() *nodestate.State
	stateChanged func()
}

// env builds what the works need of the agent now, once per pass.
func (a *Agent) env() *env {
	return &env{cfg: &a.cfg, view: &a.view, configSeen: a.configSeen, log: a.logger, lease: a.lease,
		holds: a.holds, job: a.job,
		nodeState: func() *nodestate.State { return a.state.last }, stateChanged: a.state.changed}
}

// progress logs the steps of a reconfiguration that matter: not every
// look at a component.
func (e *env) progress(ev reconfigure.Event) {
	switch ev.Kind {
	case reconfigure.EventWarning:
		e.log.warn("Reconfigure", "%s", ev.Message)
	case reconfigure.EventRendering:
		e.log.info("Reconfigure", "%s", ev.Message)
	case reconfigure.EventEtcd:
		e.log.info("Reconfigure", "etcd: %s", ev.Message)
	case reconfigure.EventComponent:
		c := ev.Component
		switch c.Kind {
		case controlplane.EventReplacing, controlplane.EventHealthy, controlplane.EventFailed,
			controlplane.EventRollingBack, controlplane.EventRolledBack:
			msg := fmt.Sprintf("%s: %s", c.Component.PodName(), c.Kind)
			if c.Message != "" {
				msg += ": " + c.Message
			}
			if c.Elapsed > 0 {
				msg += fmt.Sprintf(" (%s)", c.Elapsed.Round(100*time.Millisecond))
			}
			e.log.logErr(nil, c.Kind == controlplane.EventFailed, "Reconfigure", msg)
		}
	}
}

// nodeFor is the node as a run of doc sees it: with a kubeadm per
// release, the kubeadm of doc's own release renders it (reconfigure
// refuses a kubeadm of another minor release than kubernetesVersion), when
// the node has it.
func (e *env) nodeFor(doc []byte) reconfigure.Node {
	n := e.cfg.Node
	n.Kubeadm = e.cfg.Upgrades.Kubeadms.For(doc)
	return n
}

// upgradeProgress logs what a step does.
func (e *env) upgradeProgress(ev kubeadmupgrade.Event) {
	if ev.Component != nil {
		e.progress(reconfigure.Event{Kind: reconfigure.EventComponent, Component: *ev.Component})
		return
	}
	e.log.logErr(nil, ev.Warning, ev.Reason, ev.Message)
}

// etcdHealth is the health of the node's etcd member, as an upgrade's
// preflight needs it: the member answers, and its cluster passes the
// checks a change of it would (every member healthy, no alarm). Nil on a
// node without a local member.
func (e *env) etcdHealth(ctx context.Context) *nodestate.EtcdHealth {
	client, err := e.cfg.EtcdClient()
	if client == nil && err == nil {
		return nil
	}
	if err != nil {
		return &nodestate.EtcdHealth{Error: exitcode.Message(err)}
	}
	defer client.Close()
	cl, err := client.Cluster(ctx)
	if err != nil {
		return &nodestate.EtcdHealth{Error: exitcode.Message(err)}
	}
	h := &nodestate.EtcdHealth{Healthy: true}
	if m, ok := cl.LocalMember(); ok {
		h.Member = m.String()
	}
	var problems []string
	for _, m := range cl.Members {
		if !m.Healthy() {
			problems = append(problems, m.String()+": "+m.Problem)
		}
	}
	for _, al := range cl.Alarms {
		problems = append(problems, "alarm "+al.String())
	}
	if len(problems) > 0 {
		h.Healthy, h.Error = false, strings.Join(problems, "; ")
	}
	return h
}
