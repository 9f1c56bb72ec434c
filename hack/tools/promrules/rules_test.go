// Package promrules tests deploy/prometheus-rules.yaml with Prometheus's own
// code: its rule parser (model/rulefmt) and its rule manager evaluating
// every alert against input series over time, as `promtool test rules`
// does. It is a module of its own so that github.com/prometheus/prometheus
// stays out of the plugin's go.mod.
package promrules

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"sigs.k8s.io/yaml"
)

// ruleFile is the PrometheusRule, as the repository ships it.
const ruleFile = "../../../deploy/prometheus-rules.yaml"

// groups extracts the PrometheusRule's spec.groups as a Prometheus rule
// file (the operator hands Prometheus the same), written to a temporary
// directory.
func groups(t *testing.T) (path string, content []byte) {
	t.Helper()
	raw, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatalf("%s: %v", ruleFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s is a %s %s, not a monitoring.coreos.com/v1 PrometheusRule", ruleFile, pr.APIVersion, pr.Kind)
	}
	content, err = yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "kubeadmcfg.rules.yaml")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

// The rule file is what Prometheus accepts, with no unknown field, and
// holds the alerts docs/reference/metrics.md names, with their for durations.
func TestRulesParse(t *testing.T) {
	_, content := groups(t)
	rgs, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), promslog.NewNopLogger())
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the rules: %v", errs)
	}
	got := map[string]string{}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				got[r.Alert] = time.Duration(r.For).String()
			}
		}
	}
	want := map[string]string{
		"KubeadmConfigOutOfDate":                "10m0s",
		"KubeadmcfgAgentDown":                   "5m0s",
		"KubeadmcfgAgentCertificateExpiresSoon": "1h0m0s",
		"KubeadmcfgUpgradeStepFailed":           "1m0s",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("alerts and their for (-want +got)\n%s", diff)
	}
}

// firing is one alert firing: its name and the labels that tell which.
type firing struct {
	At    time.Duration // since the series start
	Alert string
	Which string // "node=cp-0" or "instance=cp-0:10268"
}

// The alerts' expressions, evaluated by Prometheus's rule manager every
// 30s over input series (promqltest's notation: "a+bxN" is N+1 samples
// from a, each b more; "_" is a missing sample; "stale" ends a series), as
// the agents of three nodes would export them.
func TestAlerts(t *testing.T) {
	day := float64(24 * 3600)
	for _, tc := range []struct {
		name   string
		series string
		end    time.Duration
		want   []firing // checked at every minute: what fires then
	}{{
		name: "a node out of date for 10 minutes, another for 5",
		series: `
kubeadmcfg_node_out_of_date{node="cp-0",status="true"} 1x20
kubeadmcfg_node_out_of_date{node="cp-0",status="false"} 0x20
kubeadmcfg_node_out_of_date{node="cp-1",status="true"} 1x5 0x15
kubeadmcfg_node_out_of_date{node="cp-1",status="false"} 0x5 1x15
kubeadmcfg_node_out_of_date{node="cp-2",status="unknown"} 1x20`,
		end:  12 * time.Minute,
		want: []firing{{10 * time.Minute, "KubeadmConfigOutOfDate", "node=cp-0"}, {11 * time.Minute, "KubeadmConfigOutOfDate", "node=cp-0"}, {12 * time.Minute, "KubeadmConfigOutOfDate", "node=cp-0"}},
	}, {
		// Killed after its scrape at 3m: Prometheus's scrapes of it fail
		// from 4m on (up 0), and its series go stale; its node's condition
		// stays as it was. Pending from 4m, firing 5 minutes later.
		name: "an agent killed",
		series: `
up{job="kubeadmcfg-agent",instance="cp-0:10268"} 1x3 0x12
up{job="kubeadmcfg-agent",instance="cp-1:10268"} 1x15
kubeadmcfg_agent_heartbeat_timestamp_seconds{instance="cp-0:10268",node="cp-0"} 0+60x3 stale
kubeadmcfg_agent_heartbeat_timestamp_seconds{instance="cp-1:10268",node="cp-1"} 0+60x15`,
		end:  10 * time.Minute,
		want: []firing{{9 * time.Minute, "KubeadmcfgAgentDown", "instance=cp-0:10268"}, {10 * time.Minute, "KubeadmcfgAgentDown", "instance=cp-0:10268"}},
	}, {
		// Scraped, but its renewals fail from 2m (its API server away):
		// the heartbeat stops moving.
		name: "an agent that cannot renew its Lease",
		series: `
up{job="kubeadmcfg-agent",instance="cp-0:10268"} 1x15
kubeadmcfg_agent_heartbeat_timestamp_seconds{instance="cp-0:10268",node="cp-0"} 0+60x2 120x13`,
		end: 10 * time.Minute,
		// 120s old at 4m, pending from 4m30s, firing 5 minutes later.
		want: []firing{{10 * time.Minute, "KubeadmcfgAgentDown", "node=cp-0"}},
	}, {
		// Review A2: scraped, but it never holds its Lease (another agent
		// of the node holds it, or RBAC refuses it), so it has no
		// heartbeat series; it exits after a minute and systemd restarts
		// it, one failed scrape at 3m. Pending from 0, firing 5 minutes
		// later; cp-0's agent, holding its Lease, never.
		name: "an agent that serves metrics but never holds its Lease",
		series: `
up{job="kubeadmcfg-agent",instance="cp-0:10268"} 1x12
up{job="kubeadmcfg-agent",instance="cp-1:10268"} 1x2 0 1x9
kubeadmcfg_agent_heartbeat_timestamp_seconds{instance="cp-0:10268",node="cp-0"} 0+60x12`,
		end: 7 * time.Minute,
		want: []firing{{5 * time.Minute, "KubeadmcfgAgentDown", "instance=cp-1:10268"}, {6 * time.Minute, "KubeadmcfgAgentDown", "instance=cp-1:10268"},
			{7 * time.Minute, "KubeadmcfgAgentDown", "instance=cp-1:10268"}},
	}, {
		// Review A4: during an upgrade the nodes not yet upgraded differ
		// from the document, which names the target release: no alert
		// while any agent reports the upgrade waiting, stepping or failed,
		// even from an agent that says True then; once it is over, a node
		// still out of date fires 10 minutes later (over at 12m: 22m). The
		// step that failed from 8m to 11m fires its own alert.
		name: "a node out of date during an upgrade and after it",
		series: `
kubeadmcfg_node_out_of_date{node="cp-2",status="true"} 1x25
kubeadmcfg_upgrade_phase{instance="cp-0:10268",phase="Waiting"} 1x3 0x22
kubeadmcfg_upgrade_phase{instance="cp-0:10268",phase="StepInProgress"} 0x3 1x3 0x18
kubeadmcfg_upgrade_phase{instance="cp-0:10268",phase="StepFailed"} 0x7 1x3 0x14
kubeadmcfg_upgrade_phase{instance="cp-0:10268",phase="Over"} 0x11 1x14
kubeadmcfg_upgrade_phase{instance="cp-1:10268",phase="Over"} 0x11 1x14`,
		end: 23 * time.Minute,
		want: []firing{{9 * time.Minute, "KubeadmcfgUpgradeStepFailed", ""}, {10 * time.Minute, "KubeadmcfgUpgradeStepFailed", ""},
			{11 * time.Minute, "KubeadmcfgUpgradeStepFailed", ""},
			{22 * time.Minute, "KubeadmConfigOutOfDate", "node=cp-2"}, {23 * time.Minute, "KubeadmConfigOutOfDate", "node=cp-2"}},
	}, {
		name: "a certificate within 30 days of its expiry, another not",
		series: `
kubeadmcfg_agent_certificate_expiry_timestamp_seconds{node="cp-0"} ` + strings.Repeat(ftoa(20*day)+" ", 80) + `
kubeadmcfg_agent_certificate_expiry_timestamp_seconds{node="cp-1"} ` + strings.Repeat(ftoa(60*day)+" ", 80),
		end:  61 * time.Minute,
		want: []firing{{60 * time.Minute, "KubeadmcfgAgentCertificateExpiresSoon", "node=cp-0"}, {61 * time.Minute, "KubeadmcfgAgentCertificateExpiresSoon", "node=cp-0"}},
	}, {
		// Every agent reports the upgrade record: one alert, not three.
		// Failed from 3m, firing a minute later.
		name: "an upgrade step failed",
		series: `
kubeadmcfg_upgrade_phase{instance="cp-0:10268",phase="StepInProgress"} 1x2 0x5
kubeadmcfg_upgrade_phase{instance="cp-0:10268",phase="StepFailed"} 0x2 1x5
kubeadmcfg_upgrade_phase{instance="cp-1:10268",phase="StepFailed"} 0x2 1x5
kubeadmcfg_upgrade_phase{instance="cp-2:10268",phase="StepFailed"} 0x2 1x5`,
		end:  5 * time.Minute,
		want: []firing{{4 * time.Minute, "KubeadmcfgUpgradeStepFailed", ""}, {5 * time.Minute, "KubeadmcfgUpgradeStepFailed", ""}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, evaluate(t, tc.series, tc.end)); diff != "" {
				t.Errorf("firing alerts at each minute (-want +got)\n%s", diff)
			}
		})
	}
}

// evaluate loads series (one sample a minute from time 0) and evaluates
// the rule file's groups every 30s up to end, as Prometheus's rule
// manager does; it returns the alerts firing at each whole minute.
func evaluate(t *testing.T, series string, end time.Duration) []firing {
	t.Helper()
	path, _ := groups(t)
	p := parser.NewParser(parser.Options{})
	suite, err := promqltest.NewLazyLoader("load 1m"+series, promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: p})
	if err != nil {
		t.Fatalf("input series: %v", err)
	}
	t.Cleanup(func() { _ = suite.Close() })
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       p,
	})
	const interval = 30 * time.Second
	loaded, errs := m.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, path)
	if len(errs) > 0 {
		t.Fatalf("load the rules: %v", errs)
	}
	var gs []*rules.Group
	for _, g := range loaded {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // as promtool does: no restore from a previous run
			}
		}
		gs = append(gs, g)
	}
	start := time.Unix(0, 0).UTC()
	var out []firing
	for at := time.Duration(0); at <= end; at += interval {
		ts := start.Add(at)
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gs {
				g.Eval(suite.Context(), ts)
			}
		})
		if at%time.Minute != 0 {
			continue
		}
		for _, g := range gs {
			for _, r := range g.Rules() {
				if err := r.LastError(); err != nil {
					t.Fatalf("rule %s at %s: %v", r.Name(), at, err)
				}
				ar, ok := r.(*rules.AlertingRule)
				if !ok {
					continue
				}
				for _, a := range ar.ActiveAlerts() {
					if a.State != rules.StateFiring {
						continue
					}
					which := ""
					for _, l := range []string{"node", "instance"} {
						if v := a.Labels.Get(l); v != "" && which == "" {
							which = l + "=" + v
						}
					}
					if a.Annotations.Get("summary") == "" || strings.Contains(a.Annotations.Get("description"), "<no value>") {
						t.Errorf("%s at %s: its annotations do not render: %v", ar.Name(), at, a.Annotations)
					}
					out = append(out, firing{at, ar.Name(), which})
				}
			}
		}
	}
	slices.SortFunc(out, func(x, y firing) int {
		if x.At != y.At {
			return int(x.At - y.At)
		}
		return strings.Compare(x.Alert+x.Which, y.Alert+y.Which)
	})
	return out
}

func ftoa(f float64) string { return model.SampleValue(f).String() }
