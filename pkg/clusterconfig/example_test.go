package clusterconfig_test

import (
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// Editing and validating a ClusterConfiguration with nothing but its bytes:
// an argument set by name keeps the v1beta4 list shape, and a value kubeadm
// would refuse is reported with its field path.
func ExampleDocument_Validate() {
	doc, err := clusterconfig.Parse([]byte(`apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
`))
	if err != nil {
		panic(err)
	}
	if err := doc.Set("apiServer.extraArgs.audit-log-maxage", "30"); err != nil {
		panic(err)
	}
	if err := doc.Set("networking.serviceSubnet", "10.0.0.0/8"); err != nil {
		panic(err)
	}
	report := doc.Validate(clusterconfig.ValidateOptions{})
	fmt.Println(report.Errors)
	out, _ := doc.Marshal()
	fmt.Print(string(out))
	// Output:
	// [networking.serviceSubnet: Invalid value: "10.0.0.0/8": specified service subnet is too large; for 32-bit addresses, the mask must be >= 12]
	// apiServer:
	//   extraArgs:
	//   - name: audit-log-maxage
	//     value: "30"
	// apiVersion: kubeadm.k8s.io/v1beta4
	// kind: ClusterConfiguration
	// kubernetesVersion: v1.37.2
	// networking:
	//   serviceSubnet: 10.0.0.0/8
}
