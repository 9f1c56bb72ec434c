package rollout

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// by is who acts sec seconds after base.
func by(who string, sec int) Clock {
	return Clock{Now: base.Add(time.Duration(sec) * time.Second), By: who}
}

// ts is the time stamped sec seconds after base.
func ts(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }

var (
	docV1 = []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n")
	docV2 = []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\napiServer:\n  extraArgs:\n  - {name: audit-log-maxage, value: \"7\"}\n")
	docV3 = []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\nclusterName: other\n")
	cps   = []string{"cp-0", "cp-1", "cp-2"}
)

// spec is a rollout of docV2 over cps, from docV1, as patch --rollout
// starts one.
func spec(mods ...func(*Spec)) Spec {
	s := Spec{Target: docV2, TargetResourceVersion: "812", Source: SourcePatch, Previous: docV1,
		PreviousResourceVersion: "790", Nodes: cps}
	for _, m := range mods {
		m(&s)
	}
	return s
}

// started is a record with spec's rollout started by alice at base.
func started(t *testing.T, s Spec) *Record {
	t.Helper()
	r := &Record{}
	if err := r.Start(by("alice", 0), s); err != nil {
		t.Fatal(err)
	}
	return r
}

// turn runs node's turn to outcome, at sec, as its agent would.
func turn(t *testing.T, r *Record, sec int, node string, outcome NodePhase) {
	t.Helper()
	if err := r.BeginNode(by("agent-"+node, sec), r.Status.ID, node, []string{"kube-apiserver"}, "b-"+node); err != nil {
		t.Fatal(err)
	}
	if err := r.FinishNode(by("agent-"+node, sec+1), r.Status.ID, node, Outcome{Phase: outcome, Components: []string{"kube-apiserver"}, Message: "m"}); err != nil {
		t.Fatal(err)
	}
}

// wantRefused checks that err carries code and says exactly msg.
func wantRefused(t *testing.T, err error, code exitcode.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want exit %d: %s", code, msg)
	}
	if got := exitcode.FromError(err); got != code || err.Error() != msg {
		t.Fatalf("got exit %d: %s\nwant exit %d: %s", got, err, code, msg)
	}
}

// phases lists the node phases in order.
func phases(s *Status) []NodePhase {
	out := make([]NodePhase, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = n.Phase
	}
	return out
}

// clone copies a record deeply, to compare it after a refusal.
func clone(r *Record) *Record {
	c := &Record{Target: append([]byte(nil), r.Target...), Previous: append([]byte(nil), r.Previous...),
		History: append([]HistoryEntry(nil), r.History...)}
	if r.Previous == nil {
		c.Previous = nil
	}
	if r.Target == nil {
		c.Target = nil
	}
	if r.Status != nil {
		s := *r.Status
		s.Order = append([]string(nil), s.Order...)
		s.Nodes = make([]Node, len(r.Status.Nodes))
		for i, n := range r.Status.Nodes {
			n.Components = append([]string(nil), n.Components...)
			s.Nodes[i] = n
		}
		if s.Previous != nil {
			p := *s.Previous
			s.Previous = &p
		}
		if s.Try != nil {
			tr := *s.Try
			s.Try = &tr
		}
		s.Abandoned = append([]Abandonment(nil), s.Abandoned...)
		s.LeftOut = append([]string(nil), s.LeftOut...)
		c.Status = &s
	}
	return c
}

// sameRecord compares records, an empty list and none alike, documents as
// wholes (byte by byte, cmp takes seconds over a random walk).
var sameRecord = cmp.Options{
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() != reflect.TypeFor[[]byte]() }, cmpopts.EquateEmpty()),
	cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) }),
}

// diff is cmp.Diff with sameRecord, "" at once when the values are deeply
// equal.
func diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return cmp.Diff(want, got, sameRecord)
}
