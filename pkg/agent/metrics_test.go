package agent

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// scrape reads the agent's metrics as Prometheus does, with its text
// parser: each series as "name{label=value,...}" (labels sorted) to its
// value.
func scrape(t *testing.T, a *Agent) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("the text parser refuses the metrics: %v", err)
	}
	out := map[string]float64{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[fmt.Sprintf("%s{%s}", name, strings.Join(ls, ","))] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestAgentMetrics(t *testing.T) {
	a, _, _ := testAgent(t, nil, rollouttest.DocV1)
	a.cfg.Version = "v0.3.0"
	if diff := cmp.Diff(map[string]float64{"kubeadmcfg_agent_info{node=cp-0,version=v0.3.0}": 1}, scrape(t, a)); diff != "" {
		t.Errorf("before the agent runs (-want +got)\n%s", diff)
	}

	hold(t, a)
	a.cfg.CertificateExpires = time.Date(2027, 12, 2, 1, 0, 16, 0, time.UTC)
	a.configSeen = true
	a.state.last = &nodestate.State{Differs: []string{"kube-apiserver"}, LiveHash: "sha256:x"}
	a.state.compared = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	r := rollouttest.Started(t, rollouttest.Spec())
	rollouttest.Turn(t, r, 10, "cp-0", rollout.NodeRolledBack)
	a.view.Rollout = rollouttest.ConfigMap(t, r)
	a.condition.current = nodestate.OutOfDate("cp-0", a.state.last, r.Status, nil)
	up, err := upgrade.Start(nil, nil, upgrade.Clock{Now: time.Now(), By: "t"}, "v1.37.2", "v1.37.3", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []upgrade.State{"downloading-images", "downloading-images-failed"} {
		if _, err := up.Set(upgrade.Clock{Now: time.Now(), By: "t"}, s, "", true, ""); err != nil {
			t.Fatal(err)
		}
	}
	a.view.Upgrade = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	if err := up.Encode(a.view.Upgrade.Annotations); err != nil {
		t.Fatal(err)
	}
	a.publish()

	got := scrape(t, a)
	renewed := a.lease.Lease().Spec.RenewTime.Time
	want := map[string]float64{
		"kubeadmcfg_agent_info{node=cp-0,version=v0.3.0}":                      1,
		"kubeadmcfg_agent_heartbeat_timestamp_seconds{node=cp-0}":              float64(renewed.UnixMilli()) / 1000,
		"kubeadmcfg_agent_certificate_expiry_timestamp_seconds{node=cp-0}":     float64(a.cfg.CertificateExpires.Unix()),
		"kubeadmcfg_node_in_sync{component=kube-apiserver,node=cp-0}":          0,
		"kubeadmcfg_node_in_sync{component=kube-controller-manager,node=cp-0}": 1,
		"kubeadmcfg_node_in_sync{component=kube-scheduler,node=cp-0}":          1,
		"kubeadmcfg_node_out_of_date{node=cp-0,status=true}":                   1,
		"kubeadmcfg_node_out_of_date{node=cp-0,status=false}":                  0,
		"kubeadmcfg_node_out_of_date{node=cp-0,status=unknown}":                0,
		"kubeadmcfg_node_turn_outcome{node=cp-0,outcome=Updated}":              0,
		"kubeadmcfg_node_turn_outcome{node=cp-0,outcome=Unchanged}":            0,
		"kubeadmcfg_node_turn_outcome{node=cp-0,outcome=RolledBack}":           1,
		"kubeadmcfg_node_turn_outcome{node=cp-0,outcome=RollbackFailed}":       0,
		"kubeadmcfg_node_turn_duration_seconds{node=cp-0}":                     1,
		"kubeadmcfg_node_turn_finished_timestamp_seconds{node=cp-0}":           float64(rollouttest.TS(11).Unix()),
		"kubeadmcfg_rollout_phase{phase=Progressing}":                          0,
		"kubeadmcfg_rollout_phase{phase=Paused}":                               0,
		"kubeadmcfg_rollout_phase{phase=AwaitingConfirm}":                      0,
		"kubeadmcfg_rollout_phase{phase=Reverting}":                            0,
		"kubeadmcfg_rollout_phase{phase=Succeeded}":                            0,
		"kubeadmcfg_rollout_phase{phase=Failed}":                               1,
		"kubeadmcfg_upgrade_phase{phase=Waiting}":                              0,
		"kubeadmcfg_upgrade_phase{phase=StepInProgress}":                       0,
		"kubeadmcfg_upgrade_phase{phase=StepFailed}":                           1,
		"kubeadmcfg_upgrade_phase{phase=Over}":                                 0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}

	// The state cannot be found: no component is said to be in sync.
	a.state.last = &nodestate.State{Error: "kubeadm failed"}
	a.publish()
	for series := range scrape(t, a) {
		if strings.HasPrefix(series, "kubeadmcfg_node_in_sync") {
			t.Errorf("a state that could not be found still shows %s", series)
		}
	}
}

// A scraper asking for the protobuf format gets it.
func TestAgentMetricsNegotiated(t *testing.T) {
	a, _, _ := testAgent(t, nil, rollouttest.DocV1)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	a.MetricsHandler().ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.google.protobuf") {
		t.Errorf("content type %q", ct)
	}
}

// Scrapes while the agent's loop runs read its snapshot, never its state:
// run with -race, this shows no data race.
func TestAgentMetricsWhileRunning(t *testing.T) {
	a, client, _ := testAgent(t, nil, rollouttest.DocV1)
	if _, err := client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := scrape(t, a)["kubeadmcfg_node_out_of_date{node=cp-0,status=unknown}"]; ok {
			break // the loop judged the condition (the node has no manifests: Unknown)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no condition in the metrics after 10s: %v", scrape(t, a))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// kubeadm-config changes: each change has the loop find the node's
	// state again while a scraper reads.
	scraping := make(chan struct{})
	go func() {
		defer close(scraping)
		for ctx.Err() == nil {
			rec := httptest.NewRecorder()
			a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		}
	}()
	cms := client.CoreV1().ConfigMaps("kube-system")
	for i := range 5 {
		cm, err := cms.Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Annotations = map[string]string{"change": fmt.Sprint(i)}
		if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-scraping
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A kubelet's failure leaves the upgrade in upgrading-kubelets, a step in
// progress, with the node's host status failed: the phase says StepFailed,
// as the alert KubeadmcfgUpgradeStepFailed needs.
func TestUpgradePhaseOfAFailedHost(t *testing.T) {
	c := upgrade.Clock{Now: time.Now(), By: "agent/cp-0/1"}
	for _, tc := range []struct {
		host upgrade.HostStatus
		want upgrade.Phase
	}{
		{upgrade.HostUpgradingKubelet, upgrade.PhaseStepInProgress},
		{upgrade.HostUpgradingKubeletFailed, upgrade.PhaseStepFailed},
		{upgrade.HostUpgradedKubelet, upgrade.PhaseStepInProgress},
	} {
		t.Run(string(tc.host), func(t *testing.T) {
			a, _, _ := testAgent(t, nil, rollouttest.DocV1)
			up, err := upgrade.Start(nil, nil, c, "v1.36.3", "v1.37.2", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := up.Set(c, upgrade.UpgradingKubelets, "", true, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := up.SetHost(c, "cp-0", tc.host, "", true); err != nil {
				t.Fatal(err)
			}
			a.view.Upgrade = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
			if err := up.Encode(a.view.Upgrade.Annotations); err != nil {
				t.Fatal(err)
			}
			a.publish()
			got := map[string]float64{}
			for series, v := range scrape(t, a) {
				if strings.HasPrefix(series, "kubeadmcfg_upgrade_phase{") {
					got[series] = v
				}
			}
			want := map[string]float64{}
			for _, p := range upgrade.Phases() {
				want["kubeadmcfg_upgrade_phase{phase="+string(p)+"}"] = boolean(p == tc.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
