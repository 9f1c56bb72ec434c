package kubeadmupgrade_test

import (
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
)

// What a step runs: its phases in order, the gate last, and kubeadm's
// arguments for each. A step run again starts at the phase it stopped in,
// or from the start when it stopped in the gate.
func ExamplePhases() {
	fmt.Println(strings.Join(kubeadmupgrade.Phases(kubeadmupgrade.Upgrade), ", "))
	fmt.Println(strings.Join(kubeadmupgrade.Args(kubeadmupgrade.Upgrade, "addon all", "/etc/kubernetes/tmp/kubeadmcfg-upgrade.yaml", "/etc/kubernetes/patches"), " "))
	fmt.Println(kubeadmupgrade.StartPhase(kubeadmupgrade.Upgrade, kubeadmupgrade.Gate))
	// Output:
	// preflight, control-plane, kubelet-config, addon all, post-upgrade, gate
	// upgrade node phase addon all --config /etc/kubernetes/tmp/kubeadmcfg-upgrade.yaml --patches /etc/kubernetes/patches
	// preflight
}
