package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	nodeagent "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// printed is what the agent's printer writes for events, in format.
func printed(t *testing.T, format string, events []nodeagent.Event) string {
	t.Helper()
	cmd := NewCmdAgent(cmdutil.NewClusterFlags(), genericiooptions.NewTestIOStreamsDiscard())
	var out bytes.Buffer
	p := newPrinter(format, &out, "cp-0", func(err error) error { return cmdutil.ReconfigureHint(cmd, err) })
	for _, e := range events {
		p.print(e)
	}
	return out.String()
}

// Events as the agent hands them over, on an API server whose clock says
// 03:04:05.25 UTC (in a zone that is not UTC, as a Date header parsed
// elsewhere could be).
var (
	serverTime = time.Date(2026, 12, 5, 4, 4, 5, 250_000_000, time.FixedZone("CET", 3600))
	discover   = &reconfigure.StageError{Stage: reconfigure.StageDiscover, Err: exitcode.New(exitcode.Failure,
		errors.New("cannot discover this node's advertise address: open /etc/kubernetes/manifests/kube-apiserver.yaml: no such file or directory"))}
	events = []nodeagent.Event{
		{Time: serverTime, Reason: "NodeStarted", Message: "node cp-0 started its turn in rollout 7", Rollout: 7},
		{Time: serverTime, Warning: true, Reason: "NodeRolledBack", Err: discover, Rollout: 7,
			Message: "node cp-0 failed before changing anything: " + discover.Error() + "; nothing was changed on the node"},
		{Time: serverTime, Reason: "UpgradePhase", Message: "node cp-0: upgrading-control-plane-cp-0: phase control-plane",
			Upgrade: "v1.38.0", Step: "upgrading-control-plane-cp-0", Phase: "control-plane"},
		{Time: serverTime, Warning: true, Reason: "WatchFailed", Message: "following kubeadm-config: connection refused;\nreading it again"},
	}
)

// The text format is the agent's line as it has always been, which
// scripts and the e2e tests read: the server's time to the second, in
// UTC, info or warning, the reason, the message on one line with the flag
// that fixes its error; no other key.
func TestPrinterText(t *testing.T) {
	want := `2026-12-05T03:04:05Z info NodeStarted: node cp-0 started its turn in rollout 7
2026-12-05T03:04:05Z warning NodeRolledBack: node cp-0 failed before changing anything: cannot discover this node's advertise address: open /etc/kubernetes/manifests/kube-apiserver.yaml: no such file or directory; nothing was changed on the node (give --advertise-address and --bind-port)
2026-12-05T03:04:05Z info UpgradePhase: node cp-0: upgrading-control-plane-cp-0: phase control-plane
2026-12-05T03:04:05Z warning WatchFailed: following kubeadm-config: connection refused; reading it again
`
	if diff := cmp.Diff(want, printed(t, logFormatText, events)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The JSON format is one object per line, as slog's JSONHandler writes
// them: the server's time, the level, the message as the text line says
// it, the node on every record, and the rollout, upgrade, step, phase and
// error of the events that have them, and only those.
func TestPrinterJSON(t *testing.T) {
	out := printed(t, logFormatJSON, events)
	t.Logf("printed:\n%s", out)
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON object: %q: %v", line, err)
		}
		got = append(got, m)
	}
	const at = "2026-12-05T03:04:05.25Z"
	want := []map[string]any{
		{"time": at, "level": "INFO", "msg": "node cp-0 started its turn in rollout 7", "node": "cp-0", "reason": "NodeStarted", "rollout": 7.0},
		{"time": at, "level": "WARN", "node": "cp-0", "reason": "NodeRolledBack", "rollout": 7.0,
			"msg":   "node cp-0 failed before changing anything: " + discover.Error() + "; nothing was changed on the node (give --advertise-address and --bind-port)",
			"error": discover.Error()},
		{"time": at, "level": "INFO", "msg": "node cp-0: upgrading-control-plane-cp-0: phase control-plane", "node": "cp-0", "reason": "UpgradePhase",
			"upgrade": "v1.38.0", "step": "upgrading-control-plane-cp-0", "phase": "control-plane"},
		{"time": at, "level": "WARN", "msg": "following kubeadm-config: connection refused;\nreading it again", "node": "cp-0", "reason": "WatchFailed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
