package cmdutil

import (
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
)

// rolloutFlags parses args into the flags of a command with (or without)
// --rollout, as cobra would.
func rolloutFlags(t *testing.T, withRollout bool, args ...string) *RolloutFlags {
	t.Helper()
	f := NewRolloutFlags()
	cmd := &cobra.Command{Use: "x"}
	f.AddFlags(cmd, withRollout)
	cmd.Flags().Duration("timeout", 0, "")
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	f.Complete(cmd)
	return f
}

func TestRolloutFlagsValidate(t *testing.T) {
	write := func(args ...string) *RolloutFlags { return rolloutFlags(t, true, args...) }
	start := func(args ...string) *RolloutFlags { return rolloutFlags(t, false, args...) }
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"no rollout", write(), ""},
		{"rollout", write("--rollout", "--nodes", "cp-1,cp-0", "--canary", "1", "--try", "5m", "--wait"), ""},
		{"start", start("--nodes", "cp-0", "--wait"), ""},
		{"rollout flags without --rollout", write("--canary", "1", "--wait"), "--canary, --wait only go with --rollout"},
		{"empty node", start("--nodes", "cp-0,,cp-1"), "--nodes: node 2 has no name"},
		{"bad node", start("--nodes", "CP_0"), `--nodes: "CP_0" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"node twice", start("--nodes", "cp-0,cp-1,cp-0"), "--nodes names cp-0 twice"},
		{"negative canary", start("--canary", "-1"), "--canary must be at least 0, not -1"},
		{"canary of every node", start("--nodes", "cp-0,cp-1", "--canary", "2"), "--canary must be fewer than the 2 nodes of --nodes, not 2"},
		{"negative try", start("--try", "-1s"), "--try must not be negative, not -1s"},
		{"try too short", start("--try", "10ms"), "--try must be at least 1s, not 10ms"},
		{"stale-after", start("--stale-after", "10ms"), "--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not 10ms"},
		{"stale-after of each Lease", start("--stale-after", "0s"), ""},
	})
}

// TestRolloutBudget: a wait has no limit unless --timeout is given; without
// a wait, the preflight's own bound is added to the reads' and writes', and
// --timeout, when given, bounds both.
func TestRolloutBudget(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "30s"},
		{[]string{"--rollout"}, "2m30s"},
		{[]string{"--rollout", "--timeout", "5m"}, "30s"},
		{[]string{"--rollout", "--wait"}, "0s"},
		{[]string{"--rollout", "--wait", "--timeout", "5m"}, "30s"},
		{[]string{"--wait"}, "30s"}, // refused by Validate: no rollout to wait for
	} {
		f := rolloutFlags(t, true, tc.args...)
		if got := f.Budget(30e9).String(); got != tc.want {
			t.Errorf("%v: budget %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestRolloutPreflightWait: the preflight waits within --timeout when it is
// given, else for the operator's default.
func TestRolloutPreflightWait(t *testing.T) {
	if got := rolloutFlags(t, true, "--rollout").Operator(time.Minute, nil).PreflightWait; got != 0 {
		t.Errorf("without --timeout: %s, want 0 (operator.DefaultPreflightWait)", got)
	}
	if got := rolloutFlags(t, true, "--rollout", "--timeout", "1m").Operator(time.Minute, nil).PreflightWait; got != time.Minute {
		t.Errorf("with --timeout 1m: %s", got)
	}
}
