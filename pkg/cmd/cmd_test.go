package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestEveryVerbIsDocumented: long help and examples on every command, the
// examples starting with a comment line, help reading as kubectl's.
func TestEveryVerbIsDocumented(t *testing.T) {
	root := NewCmdRoot(genericiooptions.NewTestIOStreamsDiscard())
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" || sub.Parent().Name() == "completion" {
				continue
			}
			t.Run(sub.CommandPath(), func(t *testing.T) {
				if sub.Long == "" || sub.Short == "" {
					t.Error("no long or short help")
				}
				if !strings.HasPrefix(strings.TrimSpace(sub.Example), "# ") {
					t.Errorf("example does not start with a # comment line: %q", sub.Example)
				}
				if !strings.HasPrefix(sub.CommandPath(), "kubectl kubeadmcfg ") {
					t.Errorf("help reads %q", sub.CommandPath())
				}
			})
			walk(sub)
		}
	}
	walk(root)
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"get", "--nope"},
		{"get", "extra-arg"},
		{"patch"},
		{"upgrade-set"},
		{"upgrade-set", "Not_A_State"},
		{"upgrade-host", "node-1"},
		{"upgrade-host", "node-1", "Happy!"},
		{"upgrade-run", "upgrading-second-master", "kubeadm"},
		{"upgrade-run", "upgrading-second-master", "--"},
		{"upgrade-run", "a", "b", "--", "kubeadm"},
		{"upgrade-run", "--heartbeat-interval", "1ms", "upgrading-second-master", "--", "true"},
		{"upgrade-plan"},
		{"upgrade-plan", "show", "a", "b"},
		{"upgrade-plan", "show", "--current", "kubeadm"},
		{"upgrade-plan", "show", "/nonexistent/plan.yaml"},
		{"backup", "verify"},
		{"restore"},
		{"reconfigure", "extra-arg"},
		// etcd is a component of reconfigure since issue 22; kubelet is not.
		{"reconfigure", "--components", "kubelet"},
		{"reconfigure", "--dry-run=server"},
		{"version", "-o", "table"},
	} {
		var errOut bytes.Buffer
		err := Run(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &errOut}, args)
		if got := exitcode.FromError(err); got != exitcode.Usage {
			t.Errorf("%v: exit %d (%v), want 2", args, got, err)
		}
	}
}
