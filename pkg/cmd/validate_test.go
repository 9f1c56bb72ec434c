package cmd

import (
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

// Every verb's Validate, with the exact message a user sees. Validate does
// no I/O, so these need no cluster.

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestBackupValidate(t *testing.T) {
	b := func(mutate func(o *BackupOptions)) *BackupOptions {
		o := NewBackupOptions(cmdutil.NewClusterFlags(), streams)
		mutate(o)
		return o
	}
	verify := func(all bool, names ...string) *BackupVerifyOptions {
		o := NewBackupVerifyOptions(streams)
		o.All, o.Names = all, names
		return o
	}
	prune := NewBackupPruneOptions(streams)
	prune.Backup.Keep = -1
	badVersion := verify(true)
	badVersion.KubeadmVersion = "1"
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"backup valid", b(func(*BackupOptions) {}), ""},
		{"backup keep", b(func(o *BackupOptions) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
		{"backup key", b(func(o *BackupOptions) { o.Key = "" }), "--key must not be empty"},
		{"backup timeout", b(func(o *BackupOptions) { o.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"list", NewBackupListOptions(streams), ""},
		{"verify all", verify(true), ""},
		{"verify names", verify(false, "a"), ""},
		{"verify neither", verify(false), "give backup names or --all, not both or neither"},
		{"verify both", verify(true, "a"), "give backup names or --all, not both or neither"},
		{"verify kubeadm-version", badVersion, `--kubeadm-version: want a version such as v1.37.2, not "1"`},
		{"prune keep", prune, "--keep must be at least 1, not -1"},
	})
}

func TestUpgradeValidate(t *testing.T) {
	flags := func() *UpgradeFlags { return NewUpgradeFlags(cmdutil.NewClusterFlags(), streams) }
	start := func(to, from string, nodes ...string) *UpgradeStartOptions {
		return &UpgradeStartOptions{UpgradeFlags: flags(), To: to, From: from, ControlPlaneNodes: nodes}
	}
	set := func(state, expect string) *UpgradeSetOptions {
		return &UpgradeSetOptions{UpgradeFlags: flags(), State: state, Expect: expect}
	}
	host := func(node, status, expect string) *UpgradeHostOptions {
		return &UpgradeHostOptions{UpgradeFlags: flags(), Node: node, Status: status, Expect: expect}
	}
	audit := func(stuck, stale, interval time.Duration) *UpgradeAuditOptions {
		return &UpgradeAuditOptions{UpgradeFlags: flags(), StuckAfter: stuck, StaleAfter: stale, Interval: interval}
	}
	runOpts := func(mutate func(o *UpgradeRunOptions)) *UpgradeRunOptions {
		o := &UpgradeRunOptions{UpgradeFlags: flags(), Step: "upgrading-second-master", Command: []string{"kubeadm", "upgrade", "node"},
			HeartbeatInterval: 5 * time.Second}
		mutate(o)
		return o
	}
	show := func(current bool, nodes ...string) *UpgradePlanShowOptions {
		return &UpgradePlanShowOptions{UpgradeFlags: flags(), Current: current, ControlPlaneNodes: nodes}
	}
	noState := &UpgradeStatusOptions{UpgradeFlags: flags()}
	noState.StateConfigMap = ""
	statusTimeout := &UpgradeStatusOptions{UpgradeFlags: flags()}
	statusTimeout.Retry.Timeout = 0
	badTimeout := &UpgradeFailOptions{UpgradeFlags: flags()}
	badTimeout.Retry.Timeout = -time.Second
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"status", &UpgradeStatusOptions{UpgradeFlags: flags()}, ""},
		{"status state-configmap", noState, "--state-configmap must not be empty"},
		{"status timeout", statusTimeout, "--timeout must be positive, not 0s"},
		{"start", start("v1.37.3", ""), ""},
		{"start to", start("1.37", ""), `--to must be a Kubernetes version such as v1.37.2, not "1.37"`},
		{"start from", start("v1.37.3", "x"), `--from must be a Kubernetes version such as v1.37.2, not "x"`},
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
		{"delete", &UpgradeDeleteOptions{UpgradeFlags: flags()}, ""},
		{"run", runOpts(func(*UpgradeRunOptions) {}), ""},
		{"run step", runOpts(func(o *UpgradeRunOptions) { o.Step = "" }), `STEP: "" is not a state name (lowercase letters, digits, '-' and '.')`},
		{"run expect", runOpts(func(o *UpgradeRunOptions) { o.Expect = "Done" }), `--expect: "Done" is not a state name (lowercase letters, digits, '-' and '.')`},
		{"run host", runOpts(func(o *UpgradeRunOptions) { o.Host = "a b" }), `--host: "a b" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"run empty command", runOpts(func(o *UpgradeRunOptions) { o.Command = []string{""} }), "COMMAND must not be empty"},
		{"run run-timeout", runOpts(func(o *UpgradeRunOptions) { o.RunTimeout = -time.Second }), "--run-timeout must not be negative, not -1s"},
		{"run heartbeat", runOpts(func(o *UpgradeRunOptions) { o.HeartbeatInterval = time.Millisecond }), "--heartbeat-interval must be at least 1s, not 1ms"},
		{"run timeout", runOpts(func(o *UpgradeRunOptions) { o.Retry.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"plan show", show(false), ""},
		{"plan show nodes", show(false, "a", "-b"), `--control-plane-nodes: "-b" is not a node name (lowercase letters, digits, '-' and '.')`},
		{"plan show current with nodes", show(true, "a"), "--control-plane-nodes expands a plan that is not yet an upgrade's, not --current"},
	})
}

func TestReconfigureValidate(t *testing.T) {
	r := func(mutate func(o *ReconfigureOptions)) *ReconfigureOptions {
		o := NewReconfigureOptions(cmdutil.NewClusterFlags(), streams)
		o.Node.Name = "cp-1"
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"defaults", r(func(*ReconfigureOptions) {}), ""},
		{"latest good, one component, dry run", r(func(o *ReconfigureOptions) {
			o.LatestGood, o.Components, o.DryRun = true, []string{"kube-apiserver"}, "client"
		}), ""},
		{"unknown component", r(func(o *ReconfigureOptions) { o.Components = []string{"apiserver", "etcd"} }),
			`--components: unknown component "etcd" (want apiserver, controller-manager or scheduler)`},
		{"no component", r(func(o *ReconfigureOptions) { o.Components = nil }),
			"--components: no component given (want apiserver, controller-manager or scheduler)"},
		{"two sources", r(func(o *ReconfigureOptions) { o.FromBackup, o.LatestGood = "b", true }),
			"give --from-backup or --latest-good, not both"},
		{"node name", r(func(o *ReconfigureOptions) { o.Node.Name = "CP_1" }),
			`--node-name "CP_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"advertise address", r(func(o *ReconfigureOptions) { o.Node.AdvertiseAddress = "cp-1" }),
			`--advertise-address must be an IP address, not "cp-1"`},
		{"bind port", r(func(o *ReconfigureOptions) { o.bindPortSet, o.Node.BindPort = true, 70000 }),
			"--bind-port must be between 1 and 65535, not 70000"},
		{"server dry run", r(func(o *ReconfigureOptions) { o.DryRun = "server" }),
			`--dry-run must be none or client, not "server": reconfigure changes files on this node, not objects in the API`},
		{"other dry run", r(func(o *ReconfigureOptions) { o.DryRun = "all" }), `--dry-run must be none or client, not "all"`},
		{"wait", r(func(o *ReconfigureOptions) { o.Wait = 0 }), "--wait must be positive, not 0s"},
		{"manifests dir", r(func(o *ReconfigureOptions) { o.ManifestsDir = " " }), "--manifests-dir must not be empty"},
		{"kubeadm", r(func(o *ReconfigureOptions) { o.Kubeadm = "" }), "--kubeadm must not be empty"},
		{"key", r(func(o *ReconfigureOptions) { o.Key = "" }), "--key must not be empty"},
		{"keep", r(func(o *ReconfigureOptions) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
	})
}
