package upgrade

import (
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestUpgradeValidate(t *testing.T) {
	flags := func() *Flags { return NewFlags(cmdutil.NewClusterFlags(), streams) }
	start := func(to, from string, nodes ...string) *StartOptions {
		return &StartOptions{Flags: flags(), To: to, From: from, ControlPlaneNodes: nodes}
	}
	set := func(state, expect string) *SetOptions {
		return &SetOptions{Flags: flags(), State: state, Expect: expect}
	}
	host := func(node, status, expect string) *HostOptions {
		return &HostOptions{Flags: flags(), Node: node, Status: status, Expect: expect}
	}
	audit := func(stuck, stale, interval time.Duration) *AuditOptions {
		return &AuditOptions{Flags: flags(), StuckAfter: stuck, StaleAfter: stale, Interval: interval}
	}
	runOpts := func(mutate func(o *RunOptions)) *RunOptions {
		o := &RunOptions{Flags: flags(), Step: "upgrading-second-master", Command: []string{"kubeadm", "upgrade", "node"},
			HeartbeatInterval: 5 * time.Second}
		mutate(o)
		return o
	}
	show := func(current bool, nodes ...string) *PlanShowOptions {
		return &PlanShowOptions{Flags: flags(), Current: current, ControlPlaneNodes: nodes}
	}
	apply := func(version string, mutate func(o *ApplyOptions)) *ApplyOptions {
		o := NewApplyOptions(cmdutil.NewClusterFlags(), streams)
		o.Version = version
		if mutate != nil {
			mutate(o)
		}
		return o
	}
	resume := func(mutate func(o *ResumeOptions)) *ResumeOptions {
		o := NewResumeOptions(cmdutil.NewClusterFlags(), streams)
		mutate(o)
		return o
	}
	noState := &StatusOptions{Flags: flags()}
	noState.StateConfigMap = ""
	statusTimeout := &StatusOptions{Flags: flags()}
	statusTimeout.Retry.Timeout = 0
	badTimeout := &FailOptions{Flags: flags()}
	badTimeout.Retry.Timeout = -time.Second
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"status", &StatusOptions{Flags: flags()}, ""},
		{"status stale-after", &StatusOptions{Flags: flags(), StaleAfter: time.Millisecond}, "--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not 1ms"},
		{"apply", apply("v1.37.2", nil), ""},
		{"apply a prerelease", apply("v1.38.0-rc.1", nil), "VERSION: v1.38.0-rc.1 is a pre-release, which the agents' kubeadm upgrade refuses " +
			"(it allows no release candidate or experimental upgrade): upgrade to a release, or drive a pre-release by hand with upgrade-start and upgrade-run"},
		{"apply trailing space", apply("v1.37.2 ", nil), `VERSION must be a Kubernetes version such as v1.37.2, not "v1.37.2 "`},
		{"apply newline", apply("v1.37.2\n", nil), `VERSION must be a Kubernetes version such as v1.37.2, not "v1.37.2\n"`},
		{"apply build metadata", apply("v1.37.2+build", nil), `VERSION must be a Kubernetes version such as v1.37.2, not "v1.37.2+build": build metadata names no release`},
		{"apply version", apply("1.37.2", nil), `VERSION must be a Kubernetes version such as v1.37.2, not "1.37.2"`},
		{"apply version label", apply("stable-1.37", nil), `VERSION must be a Kubernetes version such as v1.37.2, not "stable-1.37"`},
		{"apply nodes", apply("v1.37.2", func(o *ApplyOptions) { o.ControlPlaneNodes = []string{"cp-0", "CP_1"} }),
			`--control-plane-nodes: "CP_1" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"apply nodes twice", apply("v1.37.2", func(o *ApplyOptions) { o.ControlPlaneNodes = []string{"cp-0", "cp-1", "cp-0"} }),
			"--control-plane-nodes names cp-0 twice"},
		{"apply stale-after", apply("v1.37.2", func(o *ApplyOptions) { o.StaleAfter = 500 * time.Millisecond }), "--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not 500ms"},
		{"apply timeout", apply("v1.37.2", func(o *ApplyOptions) { o.Retry.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"apply state-configmap", apply("v1.37.2", func(o *ApplyOptions) { o.StateConfigMap = "" }), "--state-configmap must not be empty"},
		{"resume", resume(func(*ResumeOptions) {}), ""},
		{"resume stale-after", resume(func(o *ResumeOptions) { o.StaleAfter = -time.Second }), "--stale-after must be 0 (each agent's own Lease duration) or at least 1s, not -1s"},
		{"resume timeout", resume(func(o *ResumeOptions) { o.Retry.Timeout = -time.Second }), "--timeout must be positive, not -1s"},
		{"status state-configmap", noState, "--state-configmap must not be empty"},
		{"status timeout", statusTimeout, "--timeout must be positive, not 0s"},
		{"start", start("v1.37.3", ""), ""},
		{"start to", start("1.37", ""), `--to must be a Kubernetes version such as v1.37.2, not "1.37"`},
		{"start from", start("v1.37.3", "x"), `--from must be a Kubernetes version such as v1.37.2, not "x"`},
		{"start a prerelease", start("v1.38.0-rc.1", "v1.37.2"), ""},
		{"start to trailing tab", start("v1.37.3\t", ""), `--to must be a Kubernetes version such as v1.37.2, not "v1.37.3\t"`},
		{"start from build metadata", start("v1.37.3", "v1.37.2+build"), `--from must be a Kubernetes version such as v1.37.2, not "v1.37.2+build": build metadata names no release`},
		{"start nodes", start("v1.37.3", "", "cp-0", "CP_1"), `--control-plane-nodes: "CP_1" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"set", set("upgrading-kubelets", "upgraded-second-master"), ""},
		{"set a custom plan's state", set("rolling-back", ""), ""},
		{"set misspelt", set("Flying High", ""), `STATE: "Flying High" is not a state name (lowercase letters, digits, '-' and '.') (see 'kubectl kubeadmcfg upgrade-set --help')`},
		{"set misspelt expect", set("upgrading-kubelets", "X"), `--expect: "X" is not a state name (lowercase letters, digits, '-' and '.')`},
		{"host", host("controller-1", "upgrading-kubelet", ""), ""},
		{"host misspelt", host("controller-1", "Dancing!", ""), `STATUS: "Dancing!" is not a state name (lowercase letters, digits, '-' and '.') (see 'kubectl kubeadmcfg upgrade-host --help')`},
		{"host misspelt expect", host("controller-1", "none", "X"), `--expect: "X" is not a state name (lowercase letters, digits, '-' and '.')`},
		{"host empty node", host("", "none", ""), "NODE must not be empty"},
		{"host bad node", host("Controller_1", "none", ""), `NODE: "Controller_1" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"fail timeout", badTimeout, "--timeout must be positive, not -1s"},
		{"audit", audit(time.Minute, time.Minute, 0), ""},
		{"audit stuck-after", audit(0, time.Minute, 0), "--stuck-after must be positive, not 0s"},
		{"audit stale-after", audit(time.Minute, -time.Second, 0), "--stale-after must be positive, not -1s"},
		{"audit interval", audit(time.Minute, time.Minute, -time.Second), "--interval must not be negative, not -1s"},
		{"delete", &DeleteOptions{Flags: flags()}, ""},
		{"run", runOpts(func(*RunOptions) {}), ""},
		{"run step", runOpts(func(o *RunOptions) { o.Step = "" }), `STEP: "" is not a state name (lowercase letters, digits, '-' and '.')`},
		{"run expect", runOpts(func(o *RunOptions) { o.Expect = "Done" }), `--expect: "Done" is not a state name (lowercase letters, digits, '-' and '.')`},
		{"run host", runOpts(func(o *RunOptions) { o.Host = "a b" }), `--host: "a b" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"run empty command", runOpts(func(o *RunOptions) { o.Command = []string{""} }), "COMMAND must not be empty"},
		{"run run-timeout", runOpts(func(o *RunOptions) { o.RunTimeout = -time.Second }), "--run-timeout must not be negative, not -1s"},
		{"run heartbeat", runOpts(func(o *RunOptions) { o.HeartbeatInterval = time.Millisecond }), "--heartbeat-interval must be at least 1s, not 1ms"},
		{"run timeout", runOpts(func(o *RunOptions) { o.Retry.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"plan show", show(false), ""},
		{"plan show nodes", show(false, "a", "-b"), `--control-plane-nodes: "-b" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"plan show current with nodes", show(true, "a"), "--control-plane-nodes expands a plan that is not yet an upgrade's, not --current"},
	})
}
