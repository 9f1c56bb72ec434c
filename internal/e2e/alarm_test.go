package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodeagent "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
)

// The alarm, as monitoring sees it: the agents' Node condition
// KubeadmConfigOutOfDate and its Events, their metrics read with
// Prometheus's text parser, and `nodes --exit-code`. The steps of TestAgent
// check them on the way.

// condition reads node name's KubeadmConfigOutOfDate condition.
func (c *agentCluster) condition(t *testing.T, name string) (corev1.NodeCondition, bool) {
	t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == nodestate.ConditionType {
			return cond, true
		}
	}
	return corev1.NodeCondition{}, false
}

// waitConditions waits, for at most within, until every node's condition
// has status and a reason reasons names for the node.
func (c *agentCluster) waitConditions(t *testing.T, within time.Duration, status corev1.ConditionStatus, reasons map[string]string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, name := range c.names() {
		for {
			cond, ok := c.condition(t, name)
			if ok && cond.Status == status && cond.Reason == reasons[name] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s does not carry %s=%s (%s) within %s: %+v (found %v)", name, nodestate.ConditionType, status, reasons[name], within, cond, ok)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// every maps each node to reason.
func (c *agentCluster) every(reason string) map[string]string {
	out := map[string]string{}
	for _, name := range c.names() {
		out[name] = reason
	}
	return out
}

// inSyncGauges reads node name's agent's kubeadmcfg_node_in_sync, as
// Prometheus would, with its text parser: component to value.
func (c *agentCluster) inSyncGauges(t *testing.T, name string) map[string]float64 {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + metricsAddr(name) + "/metrics")
	if err != nil {
		t.Fatalf("scrape the agent of %s: %v", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape the agent of %s: HTTP %d, %v", name, resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the agent of %s serves what Prometheus's text parser refuses: %v\n%s", name, err, body)
	}
	out := map[string]float64{}
	for _, m := range families[nodeagent.MetricNodeInSync].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["node"] != name {
			t.Errorf("the agent of %s labels its gauge with node %q", name, labels["node"])
		}
		out[labels["component"]] = m.GetGauge().GetValue()
	}
	return out
}

// wantGauges checks every agent's kubeadmcfg_node_in_sync: each of
// components at want, the others at 1 (the test nodes run kube-apiserver,
// kube-controller-manager and kube-scheduler; etcd is external).
func (c *agentCluster) wantGauges(t *testing.T, want float64, components ...string) {
	t.Helper()
	for _, name := range c.names() {
		exp := map[string]float64{"kube-apiserver": 1, "kube-controller-manager": 1, "kube-scheduler": 1}
		for _, comp := range components {
			exp[comp] = want
		}
		if diff := cmp.Diff(exp, c.inSyncGauges(t, name)); diff != "" {
			t.Errorf("kubeadmcfg_node_in_sync of %s (-want +got)\n%s", name, diff)
		}
	}
}

// nodesExitCode runs `nodes --exit-code` and checks its status: 0, or
// exitcode.OutOfSync with no error line.
func (c *agentCluster) nodesExitCode(t *testing.T, want exitcode.Code) {
	t.Helper()
	r := c.plugin(t, time.Minute, "nodes", "--exit-code")
	if r.code != int(want) || strings.Contains(r.stderr, "error:") || !strings.Contains(r.stdout, "IN-SYNC") {
		t.Errorf("nodes --exit-code: want exit %d, the table and no error, got %s", want, r)
	}
}

// nodeEvents lists the agents' Events on each Node, oldest first, as
// "Type Reason".
func (c *agentCluster) nodeEvents(t *testing.T) map[string][]string {
	t.Helper()
	list, err := c.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
	if err != nil {
		t.Fatal(err)
	}
	evs := slices.DeleteFunc(list.Items, func(ev corev1.Event) bool { return ev.ReportingController != engine.NodeReportingController })
	slices.SortStableFunc(evs, func(a, b corev1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	out := map[string][]string{}
	for _, ev := range evs {
		out[ev.InvolvedObject.Name] = append(out[ev.InvolvedObject.Name], ev.Type+" "+ev.Reason)
	}
	return out
}

// wantNodeEvents checks the agents' Events per Node: transitions, each
// once, as out-of-date (o) and in-sync (i) letters, oldest first.
func (c *agentCluster) wantNodeEvents(t *testing.T, transitions string) {
	t.Helper()
	var one []string
	for _, r := range transitions {
		switch r {
		case 'o':
			one = append(one, corev1.EventTypeWarning+" "+nodeagent.EventOutOfDate)
		case 'i':
			one = append(one, corev1.EventTypeNormal+" "+nodeagent.EventInSync)
		default:
			panic(fmt.Sprintf("transition %q", r))
		}
	}
	want := map[string][]string{}
	for _, name := range c.names() {
		want[name] = one
	}
	if diff := cmp.Diff(want, c.nodeEvents(t)); diff != "" {
		t.Errorf("the agents' Events on the Nodes (-want +got)\n%s", diff)
	}
}

// alarmWithin is how soon a Node's condition follows a change of
// kubeadm-config: the agents find the node's state again on the change, and
// write the condition in the same pass; the record's resync bounds it.
const alarmWithin = nodeagent.DefaultResync
