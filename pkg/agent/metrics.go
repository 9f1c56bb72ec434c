package agent

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// What the agent tells Prometheus: every figure is a gauge of what the
// agent knows at the moment of the scrape, built from a snapshot its loop
// publishes after each pass (and the Lease's last renewal, read live).
//
// The metrics are encoded with the Prometheus project's own exposition
// code (github.com/prometheus/common/expfmt, in the text or protobuf format
// the scraper asks for), not with client_golang's registry: the plugin is
// one binary for every command, and client_golang's packages cost every
// command, the agent's or not, their start-up (their init registers the
// default collectors) and half a megabyte of binary; nothing here runs
// before a scrape. docs/reference/metrics.md documents each metric.

// The metric names.
const (
	MetricAgentInfo         = "kubeadmcfg_agent_info"
	MetricHeartbeat         = "kubeadmcfg_agent_heartbeat_timestamp_seconds"
	MetricCertificateExpiry = "kubeadmcfg_agent_certificate_expiry_timestamp_seconds"
	MetricNodeInSync        = "kubeadmcfg_node_in_sync"
	MetricNodeOutOfDate     = "kubeadmcfg_node_out_of_date"
	MetricTurnOutcome       = "kubeadmcfg_node_turn_outcome"
	MetricTurnDuration      = "kubeadmcfg_node_turn_duration_seconds"
	MetricTurnFinished      = "kubeadmcfg_node_turn_finished_timestamp_seconds"
	MetricRolloutPhase      = "kubeadmcfg_rollout_phase"
	MetricUpgradePhase      = "kubeadmcfg_upgrade_phase"
)

// metrics is the snapshot a scrape reads, guarded for the HTTP server's
// goroutines.
type metrics struct {
	mu    sync.Mutex
	lease *engine.HeldLease
	snap  snapshot
}

// snapshot is what the loop knew after its last pass. Its pointers are to
// values nobody changes once made.
type snapshot struct {
	state    *nodestate.State
	compared []string
	judged   bool
	cond     nodestate.Condition
	rollout  *rollout.Status
	upgrade  upgrade.Phase
}

// publish takes the loop's view for the next scrapes.
func (a *Agent) publish() {
	s := snapshot{state: a.state.last, compared: a.state.compared, judged: a.configSeen, cond: a.condition.current,
		rollout: lastRollout(a.view.Rollout), upgrade: upgradePhase(a.view.Upgrade)}
	a.metrics.mu.Lock()
	a.metrics.lease, a.metrics.snap = a.lease, s
	a.metrics.mu.Unlock()
}

// upgradePhase is the phase of the upgrade record cm (Record.Phase: a
// host's failed step, such as a kubelet's, is a failed step too); "" when
// there is none, or it cannot be read.
func upgradePhase(cm *corev1.ConfigMap) upgrade.Phase {
	if cm == nil {
		return ""
	}
	rec, ok, err := upgrade.FromConfigMap(cm)
	if err != nil || !ok {
		return ""
	}
	return rec.Phase()
}

// MetricsHandler serves the agent's metrics to Prometheus, in the
// exposition format its request asks for (the text format by default).
// It may serve before Run starts: then it has only the agent's own.
func (a *Agent) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		format := expfmt.Negotiate(r.Header)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, mf := range a.families() {
			if err := enc.Encode(mf); err != nil {
				return // the scraper went away
			}
		}
	})
}

// families builds every metric family from the snapshot, sorted by name
// as client_golang's registry serves them.
func (a *Agent) families() []*dto.MetricFamily {
	a.metrics.mu.Lock()
	s, lease := a.metrics.snap, a.metrics.lease
	a.metrics.mu.Unlock()
	node := label("node", a.cfg.Name)
	var out []*dto.MetricFamily
	add := func(name, help string, ms ...*dto.Metric) {
		if len(ms) > 0 {
			out = append(out, &dto.MetricFamily{Name: new(name), Help: new(help), Type: dto.MetricType_GAUGE.Enum(), Metric: ms})
		}
	}
	add(MetricAgentInfo, "The agent of this node, with the plugin version it runs (always 1).",
		gauge(1, node, label("version", a.cfg.Version)))
	if lease != nil {
		if l := lease.Lease(); l != nil && l.Spec.RenewTime != nil {
			add(MetricHeartbeat, "When the agent last renewed its Lease, on the API server's clock (Unix seconds).",
				gauge(unix(l.Spec.RenewTime.Time), node))
		}
	}
	if !a.cfg.CertificateExpires.IsZero() {
		add(MetricCertificateExpiry, "When the client certificate the agent authenticates with expires (Unix seconds); absent for a token.",
			gauge(unix(a.cfg.CertificateExpires), node))
	}
	if st := s.state; st != nil && st.Error == "" {
		var ms []*dto.Metric
		for _, c := range s.compared {
			ms = append(ms, gauge(boolean(!slices.Contains(st.Differs, c)), node, label("component", c)))
		}
		add(MetricNodeInSync, "1 when the component runs what the live kubeadm-config document renders to on this node, 0 when it differs; absent while the agent cannot tell.", ms...)
	}
	if s.judged {
		var ms []*dto.Metric
		for _, st := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
			ms = append(ms, gauge(boolean(s.cond.Status == st), node, label("status", lower(st))))
		}
		add(MetricNodeOutOfDate, "The node's condition KubeadmConfigOutOfDate: 1 for its status (true, false, unknown), 0 for the others.", ms...)
	}
	if r := s.rollout; r != nil {
		if e, ok := r.Lookup(a.cfg.Name); ok && !e.FinishedAt.IsZero() {
			var ms []*dto.Metric
			for _, p := range []rollout.NodePhase{rollout.NodeUpdated, rollout.NodeUnchanged, rollout.NodeRolledBack, rollout.NodeRollbackFailed} {
				ms = append(ms, gauge(boolean(e.Phase == p), node, label("outcome", string(p))))
			}
			add(MetricTurnOutcome, "The outcome of this node's turn in the current or last rollout: 1 for it, 0 for the others; absent until the turn ends.", ms...)
			if !e.StartedAt.IsZero() {
				add(MetricTurnDuration, "How long this node's turn in the current or last rollout took, as the record stamps it (whole seconds).",
					gauge(e.FinishedAt.Sub(e.StartedAt).Seconds(), node))
			}
			add(MetricTurnFinished, "When this node's turn in the current or last rollout ended, on the API server's clock (Unix seconds).",
				gauge(unix(e.FinishedAt), node))
		}
		var ms []*dto.Metric
		for _, p := range []rollout.Phase{rollout.Progressing, rollout.Paused, rollout.AwaitingConfirm, rollout.Reverting, rollout.Succeeded, rollout.Failed} {
			ms = append(ms, gauge(boolean(r.Phase == p), label("phase", string(p))))
		}
		add(MetricRolloutPhase, "The phase of the current or last rollout in the record: 1 for it, 0 for the others; absent when none was recorded.", ms...)
	}
	if s.upgrade != "" {
		var ms []*dto.Metric
		for _, p := range upgrade.Phases() {
			ms = append(ms, gauge(boolean(s.upgrade == p), label("phase", string(p))))
		}
		add(MetricUpgradePhase, "The phase of the upgrade in the upgrade record: 1 for it, 0 for the others; absent when none is recorded.", ms...)
	}
	slices.SortFunc(out, func(x, y *dto.MetricFamily) int { return strings.Compare(x.GetName(), y.GetName()) })
	return out
}

func label(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: new(name), Value: new(value)}
}

// gauge is one series, its labels sorted by name as client_golang sorts
// them.
func gauge(v float64, labels ...*dto.LabelPair) *dto.Metric {
	slices.SortFunc(labels, func(x, y *dto.LabelPair) int { return strings.Compare(x.GetName(), y.GetName()) })
	return &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: new(v)}}
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unix is t in Unix seconds, to the millisecond.
func unix(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func lower(s corev1.ConditionStatus) string {
	switch s {
	case corev1.ConditionTrue:
		return "true"
	case corev1.ConditionFalse:
		return "false"
	}
	return "unknown"
}
