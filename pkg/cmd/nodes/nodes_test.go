package nodes

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
)

func TestNodesValidate(t *testing.T) {
	opts := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), genericiooptions.NewTestIOStreamsDiscard())
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"valid", opts(func(*Options) {}), ""},
		{"stale-after", opts(func(o *Options) { o.StaleAfter = 500 * time.Millisecond }), "--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not 500ms"},
		{"timeout", opts(func(o *Options) { o.Retry.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"exit-code", opts(func(o *Options) { o.ExitCode = true }), ""},
	})
}

// --exit-code: 0 only when every node is known to run the live document;
// 11, saying nothing more, for one out of sync or unknown, or no node.
func TestExitStatus(t *testing.T) {
	row := func(s nodestate.Sync) Row { return Row{Name: "cp", InSync: s} }
	for _, tc := range []struct {
		name string
		rows []Row
		want exitcode.Code
	}{
		{"every node in sync", []Row{row(nodestate.SyncYes), row(nodestate.SyncYes)}, exitcode.OK},
		{"one out of sync", []Row{row(nodestate.SyncYes), row(nodestate.SyncNo)}, exitcode.OutOfSync},
		{"one unknown", []Row{row(nodestate.SyncUnknown), row(nodestate.SyncYes)}, exitcode.OutOfSync},
		{"no node", nil, exitcode.OutOfSync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := exitStatus(&View{Nodes: tc.rows})
			if got := exitcode.FromError(err); got != tc.want || err != nil && exitcode.Message(err) != "" {
				t.Errorf("got exit %d (%v), want exit %d and no message", got, err, tc.want)
			}
		})
	}
}

func TestPrintNodes(t *testing.T) {
	seen := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	v := &View{Nodes: []Row{
		{Name: "cp-0", ControlPlane: true, InSync: nodestate.SyncYes, Agent: nodestate.Agent{Liveness: nodestate.AgentAlive, LastSeen: seen(3 * time.Second),
			State: &nodestate.State{AgentVersion: "v0.4.0", InSync: true, LastKnownGood: "kubeadm-config-rv812"}}},
		{Name: "cp-1", ControlPlane: true, InSync: nodestate.SyncNo, InSyncReason: "kube-apiserver, kube-scheduler",
			Agent: nodestate.Agent{Liveness: nodestate.AgentLost, LastSeen: seen(2 * time.Minute), State: &nodestate.State{AgentVersion: "v0.4.0"}}},
		{Name: "cp-2", ControlPlane: true, InSync: nodestate.SyncUnknown, InSyncReason: "no agent", Agent: nodestate.Agent{Liveness: nodestate.AgentNone}},
		{Name: "old-cp", InSync: nodestate.SyncUnknown, InSyncReason: "the agent has published no state", Agent: nodestate.Agent{Liveness: nodestate.AgentLost}},
	}}
	var out bytes.Buffer
	if err := printNodes(&out, v); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"NODE                        AGENT  VERSION  IN-SYNC  DIFFERS                           LAST-KNOWN-GOOD       LAST-SEEN",
		"cp-0                        alive  v0.4.0   yes      -                                 kubeadm-config-rv812  3s ago",
		"cp-1                        lost   v0.4.0   no       kube-apiserver,kube-scheduler     -                     2m ago",
		"cp-2                        none   -        unknown  no agent                          -                     -",
		"old-cp (not control-plane)  lost   -        unknown  the agent has published no state  -                     -",
		"",
	}, "\n")
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// An agent's certificate is warned of 30 days before it runs out, and
// after; a token (no certificate published) never is.
func TestCertificateWarnings(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	agent := func(expires string) nodestate.Agent {
		return nodestate.Agent{Liveness: nodestate.AgentAlive, State: &nodestate.State{CertificateExpires: expires}}
	}
	v := &View{Nodes: []Row{
		{Name: "cp-0", Agent: agent("2027-12-02T12:00:00Z")},
		{Name: "cp-1", Agent: agent("2026-12-14T12:00:00Z")},
		{Name: "cp-2", Agent: agent("2026-11-29T12:00:00Z")},
		{Name: "cp-3", Agent: agent("")},
		{Name: "cp-4", Agent: nodestate.Agent{Liveness: nodestate.AgentNone}},
	}}
	want := []string{
		`the client certificate of node cp-1's agent expires in 12d (2026-12-14T12:00:00Z): renew it, as docs/agent.md says ("Renewing the agent's credentials")`,
		`the client certificate of node cp-2's agent expired 3d ago (2026-11-29T12:00:00Z): renew it, as docs/agent.md says ("Renewing the agent's credentials")`,
	}
	if diff := cmp.Diff(want, certificateWarnings(v, now)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
