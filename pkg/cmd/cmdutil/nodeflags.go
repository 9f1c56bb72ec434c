package cmdutil

import (
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The flags of a node's own values, shared by restore --to-file and
// reconfigure.

// NodeHelp is what the node flags mean to a command: each verb that takes
// them gives its own help.
type NodeHelp struct{ Name, Address, Port string }

// AddNodeFlags binds the flags of a node's own values: --node-name,
// --advertise-address and --bind-port.
func AddNodeFlags(cmd *cobra.Command, n *clusterconfig.NodeConfig, help NodeHelp) {
	fs := cmd.Flags()
	fs.StringVar(&n.Name, "node-name", n.Name, help.Name)
	fs.StringVar(&n.AdvertiseAddress, "advertise-address", n.AdvertiseAddress, help.Address)
	fs.Var((*portFlag)(&n.BindPort), "bind-port", help.Port)
}

// portFlag is a TCP port given as decimal digits only, as kubeadm reads
// ports: no sign, no base prefix, no underscores.
type portFlag int32

func (p *portFlag) String() string { return strconv.Itoa(int(*p)) }

func (p *portFlag) Type() string { return "port" }

// Set reads decimal digits: ParseUint refuses a sign, spaces, a base
// prefix and underscores. The range is checked by ValidateNode.
func (p *portFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return fmt.Errorf("want decimal digits, not %q", s)
	}
	*p = portFlag(n)
	return nil
}

// NodeFlagsChanged reports whether any per-node flag was given, which
// decides what a verb does with them.
func NodeFlagsChanged(cmd *cobra.Command) bool {
	fs := cmd.Flags()
	return fs.Changed("node-name") || fs.Changed("advertise-address") || fs.Changed("bind-port")
}

// ValidateNode checks a node's values as given on the command line, with
// the same messages in every verb that takes them.
func ValidateNode(n clusterconfig.NodeConfig, bindPortGiven bool) error {
	if n.Name != "" {
		if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
			return exitcode.Usagef("--node-name %q: %s", n.Name, errs[0])
		}
	}
	if n.AdvertiseAddress != "" && net.ParseIP(n.AdvertiseAddress) == nil {
		return exitcode.Usagef("--advertise-address must be an IP address, not %q", n.AdvertiseAddress)
	}
	if bindPortGiven && (n.BindPort < 1 || n.BindPort > 65535) {
		return exitcode.Usagef("--bind-port must be between 1 and 65535, not %d", n.BindPort)
	}
	return nil
}
