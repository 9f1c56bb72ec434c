package rollout

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
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	rolloutstate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestRolloutValidate(t *testing.T) {
	cluster := cmdutil.NewClusterFlags()
	start := func(mutate func(o *StartOptions)) *StartOptions {
		o := NewStartOptions(cluster, streams)
		mutate(o)
		return o
	}
	status := func(mutate func(o *StatusOptions)) *StatusOptions {
		o := NewStatusOptions(cluster, streams)
		mutate(o)
		return o
	}
	undo := func(mutate func(o *UndoOptions)) *UndoOptions {
		o := NewUndoOptions(cluster, streams)
		mutate(o)
		return o
	}
	control := func(mutate func(o *ControlOptions)) *ControlOptions {
		o := &ControlOptions{Flags: NewFlags(cluster, streams)}
		mutate(o)
		return o
	}
	abandon := func(mutate func(o *AbandonOptions)) *AbandonOptions {
		o := NewAbandonOptions(cluster, streams)
		o.Node = "cp-2"
		mutate(o)
		return o
	}
	history := &HistoryOptions{Flags: NewFlags(cluster, streams)}
	historyTimeout := &HistoryOptions{Flags: NewFlags(cluster, streams)}
	historyTimeout.Retry.Timeout = 0
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"start", start(func(*StartOptions) {}), ""},
		{"start nodes", start(func(o *StartOptions) { o.Rollout.Nodes = []string{"cp-0", "cp-0"} }), "--nodes names cp-0 twice"},
		{"start canary", start(func(o *StartOptions) { o.Rollout.Canary = -2 }), "--canary must be at least 0, not -2"},
		{"start canary over --nodes", start(func(o *StartOptions) { o.Rollout.Nodes, o.Rollout.Canary = []string{"cp-0"}, 1 }),
			"--canary must be fewer than the 1 nodes of --nodes, not 1"},
		{"start try", start(func(o *StartOptions) { o.Rollout.Try = -time.Minute }), "--try must not be negative, not -1m0s"},
		{"start timeout", start(func(o *StartOptions) { o.Retry.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"start stale-after", start(func(o *StartOptions) { o.Rollout.StaleAfter = time.Millisecond }), "--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not 1ms"},
		{"status", status(func(*StatusOptions) {}), ""},
		{"status -w with a timeout", status(func(o *StatusOptions) { o.Watch, o.Timeout = true, time.Minute }), ""},
		{"status timeout", status(func(o *StatusOptions) { o.Timeout = -time.Second }), "--timeout must not be negative, not -1s"},
		{"status stale-after", status(func(o *StatusOptions) { o.StaleAfter = -time.Second }), "--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not -1s"},
		{"status stale-after of each Lease", status(func(o *StatusOptions) { o.StaleAfter = 0 }), ""},
		{"pause", control(func(*ControlOptions) {}), ""},
		{"pause timeout", control(func(o *ControlOptions) { o.Retry.Timeout = -time.Second }), "--timeout must be positive, not -1s"},
		{"undo", undo(func(o *UndoOptions) { o.Force, o.Wait = true, true }), ""},
		{"undo keep", undo(func(o *UndoOptions) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
		{"undo timeout", undo(func(o *UndoOptions) { o.Retry.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"abandon", abandon(func(o *AbandonOptions) { o.Force = true }), ""},
		{"abandon without --force", abandon(func(*AbandonOptions) {}),
			"rollout abandon gives up on node cp-2 for good, its state unknown to the record: it needs --force"},
		{"abandon stale-after", abandon(func(o *AbandonOptions) { o.Force, o.StaleAfter = true, time.Millisecond }),
			"--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not 1ms"},
		{"history", history, ""},
		{"history timeout", historyTimeout, "--timeout must be positive, not 0s"},
	})
}

// TestEveryRolloutVerbPrintsJSON: every sub-verb has -o (json, yaml,
// jsonpath through cmdutil.PrintFlags).
func TestEveryRolloutVerbPrintsJSON(t *testing.T) {
	cmd := NewCmdRollout(cmdutil.NewClusterFlags(), streams)
	for _, sub := range cmd.Commands() {
		if sub.Flags().Lookup("output") == nil {
			t.Errorf("%s has no -o", sub.Name())
		}
	}
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 10, 0, 0, time.UTC)
	at := func(min int) time.Time { return time.Date(2026, 12, 1, 12, min, 0, 0, time.UTC) }
	s := &rolloutstate.Status{ID: 7, Kind: rolloutstate.KindRollout, Phase: rolloutstate.Paused,
		Target:    rolloutstate.Ref{Hash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ResourceVersion: "812", Source: rolloutstate.SourcePatch},
		Order:     []string{"cp-0", "cp-1", "cp-2"},
		Canary:    1,
		StartedBy: "alice", StartedAt: at(2),
		Message: "paused after 1 of 3 nodes (canary); resume to go on",
		Nodes: []rolloutstate.Node{
			{Name: "cp-0", Phase: rolloutstate.NodeUpdated, Components: []string{"kube-apiserver"}, StartedAt: at(3), FinishedAt: at(5), Starts: 1},
			{Name: "cp-1", Phase: rolloutstate.NodePending},
			{Name: "cp-2", Phase: rolloutstate.NodePending},
		}}
	v := &StatusView{Rollout: s, Nodes: []NodeRow{
		{Name: "cp-0", Agent: nodestate.Agent{Node: "cp-0", Liveness: nodestate.AgentAlive, LastSeen: &metav1.Duration{Duration: 3 * time.Second}}, InSync: nodestate.SyncNo},
		{Name: "cp-1", Agent: nodestate.Agent{Node: "cp-1", Liveness: nodestate.AgentLost, LastSeen: &metav1.Duration{Duration: 45 * time.Second}}, InSync: nodestate.SyncYes},
		{Name: "cp-2", Agent: nodestate.Agent{Node: "cp-2", Liveness: nodestate.AgentNone}, InSync: nodestate.SyncUnknown},
	}}
	var out bytes.Buffer
	if err := printStatus(&out, v, now); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"rollout 7 (rollout) Paused: target sha256:0123456789ab (patch, resourceVersion 812), started by alice 8m ago",
		"  canary: pauses after 1 node",
		"  paused after 1 of 3 nodes (canary); resume to go on",
		"",
		"NODE  PHASE    COMPONENTS      SINCE  AGENT       IN-SYNC",
		"cp-0  Updated  kube-apiserver  5m     alive (3s)  no",
		"cp-1  Pending  -               -      lost (45s)  yes",
		"cp-2  Pending  -               -      none        unknown",
		"",
	}, "\n")
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestPrintStatusNotes: what a take-back would drop, the nodes abandoned
// and an undo's nodes left out show in the header.
func TestPrintStatusNotes(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	prev := rolloutstate.Ref{Hash: "sha256:" + strings.Repeat("a", 64), ResourceVersion: "329"}
	s := &rolloutstate.Status{ID: 7, Kind: rolloutstate.KindRollout, Phase: rolloutstate.Failed,
		Target: rolloutstate.Ref{Hash: "sha256:" + strings.Repeat("b", 64), ResourceVersion: "554", Source: rolloutstate.SourceLive}, Previous: &prev,
		Untracked: &rolloutstate.Untracked{FromResourceVersion: "329", ToResourceVersion: "554", Fields: []string{"clusterName"}},
		Abandoned: []rolloutstate.Abandonment{{Node: "cp-0", Phase: rolloutstate.NodeInProgress, By: "alice", At: at}},
		StartedBy: "bob", StartedAt: at, Message: "node cp-0 was abandoned by alice: its state is unknown",
		Nodes: []rolloutstate.Node{{Name: "cp-0", Phase: rolloutstate.NodeRollbackFailed, Starts: 1}}, Order: []string{"cp-0"}}
	var out bytes.Buffer
	if err := printStatus(&out, &StatusView{Rollout: s, Nodes: []NodeRow{{Name: "cp-0", Agent: nodestate.Agent{Liveness: nodestate.AgentNone}}}}, at); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  previous document not known exactly: kubeadm-config was written outside rollouts since sha256:aaaaaaaaaaaa (resourceVersion 329 -> 554); going back to it changes clusterName\n",
		"  node cp-0 abandoned by alice at 2026-12-01T12:00:00Z (it was InProgress): its state is unknown\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status does not say %q:\n%s", want, out.String())
		}
	}
	s.Kind, s.Untracked, s.Abandoned, s.LeftOut = rolloutstate.KindUndo, nil, nil, []string{"cp-0"}
	out.Reset()
	if err := printStatus(&out, &StatusView{Rollout: s, Nodes: []NodeRow{{Name: "cp-0"}}}, at); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "  left out, abandoned: cp-0\n") {
		t.Errorf("status does not name the node left out:\n%s", out.String())
	}
}
