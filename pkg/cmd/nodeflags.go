package cmd

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

// nodeHelp is what the node flags mean to a command.
type nodeHelp struct{ name, address, port string }

// addNodeFlags binds the flags of a node's own values.
func addNodeFlags(cmd *cobra.Command, n *clusterconfig.NodeConfig, help nodeHelp) {
	fs := cmd.Flags()
	fs.StringVar(&n.Name, "node-name", n.Name, help.name)
	fs.StringVar(&n.AdvertiseAddress, "advertise-address", n.AdvertiseAddress, help.address)
	fs.Var((*portFlag)(&n.BindPort), "bind-port", help.port)
}

// portFlag is a TCP port given as decimal digits only, as kubeadm reads
// ports: no sign, no base prefix, no underscores.
type portFlag int32

func (p *portFlag) String() string { return strconv.Itoa(int(*p)) }

func (p *portFlag) Type() string { return "port" }

// Set reads decimal digits: ParseUint refuses a sign, spaces, a base
// prefix and underscores. The range is checked by validateNode.
func (p *portFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return fmt.Errorf("want decimal digits, not %q", s)
	}
	*p = portFlag(n)
	return nil
}

// nodeFlagsChanged reports whether any per-node flag was given.
func nodeFlagsChanged(cmd *cobra.Command) bool {
	fs := cmd.Flags()
	return fs.Changed("node-name") || fs.Changed("advertise-address") || fs.Changed("bind-port")
}

// validateNode checks a node's values as given on the command line.
func validateNode(n clusterconfig.NodeConfig, bindPortGiven bool) error {
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
