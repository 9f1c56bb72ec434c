package patch

import (
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func mustSet(t *testing.T, path, value string) clusterconfig.Edit {
	t.Helper()
	e, err := clusterconfig.NewSet(path, value)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPatchValidate(t *testing.T) {
	patch := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), streams)
		o.Edits = clusterconfig.Edits{mustSet(t, "clusterName", "a")}
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"valid", patch(func(*Options) {}), ""},
		{"no edits", patch(func(o *Options) { o.Edits = nil }),
			"nothing to do: give at least one --set, --set-string, --unset, --patch or --patch-file"},
		{"dry-run", patch(func(o *Options) { o.Write.DryRun = "maybe" }),
			`--dry-run must be one of none, client, server, not "maybe"`},
		{"validate", patch(func(o *Options) { o.Write.Validate = "lax" }),
			`--validate must be one of strict, warn, ignore, not "lax"`},
		{"timeout", patch(func(o *Options) { o.Write.Timeout = 0 }), "--timeout must be positive, not 0s"},
		{"queue-ttl", patch(func(o *Options) { o.Write.QueueTTL = time.Millisecond }), "--queue-ttl must be at least 1s, not 1ms"},
		{"key", patch(func(o *Options) { o.Write.Key = " " }), "--key must not be empty"},
		{"if-leader", patch(func(o *Options) { o.Write.IfLeader = "kube-system" }),
			`--if-leader must be NAMESPACE/NAME, not "kube-system"`},
		{"if-leader with two slashes", patch(func(o *Options) { o.Write.IfLeader = "a/b/c" }),
			`--if-leader must be NAMESPACE/NAME, not "a/b/c"`},
		{"kubeadm-version", patch(func(o *Options) { o.Write.KubeadmVersion = "latest" }),
			`--kubeadm-version: want a version such as v1.37.2, not "latest"`},
		{"keep", patch(func(o *Options) { o.Backup.Keep = 0 }), "--keep must be at least 1, not 0"},
		{"rollout", withArgs(t, patch(func(*Options) {}), "--rollout", "--canary", "1", "--try", "1m", "--wait"), ""},
		{"rollout flags without --rollout", withArgs(t, patch(func(*Options) {}), "--nodes", "cp-0", "--try", "1m"),
			"--nodes, --try only go with --rollout"},
		{"rollout canary", withArgs(t, patch(func(*Options) {}), "--rollout", "--canary", "-1"), "--canary must be at least 0, not -1"},
	})
}

// withArgs binds o's flags to a command and parses args, as cobra does
// before Complete reads which flags were given.
func withArgs(t *testing.T, o *Options, args ...string) *Options {
	t.Helper()
	cmd := &cobra.Command{Use: "patch"}
	o.AddFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	o.Rollout.Complete(cmd)
	return o
}

func TestPatchCompleteParsesEditsOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		patchType string
		args      []editArg
		want      string
	}{
		{"set without =", "merge", []editArg{{editSet, "clusterName"}}, `--set needs PATH=VALUE, not "clusterName"`},
		{"bad path", "merge", []editArg{{editUnset, "a..b"}}, `bad path "a..b": empty key`},
		{"strategic", "strategic", nil, `--type must be one of merge, json, not "strategic" (a ClusterConfiguration has no strategic merge schema)`},
		{"other type", "apply", nil, `--type must be one of merge, json, not "apply"`},
		{"merge patch not a mapping", "merge", []editArg{{editPatch, "[1]"}}, "a merge patch must be a mapping"},
		{"json patch not a list", "json", []editArg{{editPatch, `{"op":"add"}`}}, ""},
		{"missing patch file names the file", "merge", []editArg{{editPatchFile, "/nonexistent/p.yaml"}},
			"cannot read the patch file: open /nonexistent/p.yaml: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions(cmdutil.NewClusterFlags(), streams)
			o.PatchType, o.Args = tc.patchType, tc.args
			err := o.parseEdits()
			if err == nil || exitcode.FromError(err) != exitcode.Usage {
				t.Fatalf("want a usage error, got %v", err)
			}
			if tc.want != "" && err.Error() != tc.want {
				t.Errorf("got %q, want %q", err, tc.want)
			}
		})
	}
}
