package engine_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
)

// A controller that owns a control-plane setting changes kubeadm-config with
// the same conflict-safe engine as the plugin: the edits are parsed once, and
// re-applied to the fresh document whenever another writer got in first.
func Example() {
	ctx := context.Background()
	client := fakeCluster() // any kubernetes.Interface
	target := engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}
	eng := engine.New(client, target, engine.Options{FieldManager: "my-controller"})

	profiling, err := clusterconfig.NewSet("apiServer.extraArgs.profiling", "false")
	if err != nil {
		panic(err)
	}
	san, err := clusterconfig.NewSet("apiServer.certSANs[+]", "lb.example.com")
	if err != nil {
		panic(err)
	}
	res, err := eng.UpdateDocument(ctx, profiling, san)
	if err != nil {
		panic(err) // carries its exit code: exitcode.FromError(err)
	}
	fmt.Println("changed:", res.Changed)

	doc, err := eng.Document(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Print(doc)
	// Output:
	// changed: true
	// apiServer:
	//   certSANs:
	//   - lb.example.com
	//   extraArgs:
	//   - name: profiling
	//     value: "false"
	// apiVersion: kubeadm.k8s.io/v1beta4
	// kind: ClusterConfiguration
	// kubernetesVersion: v1.37.2
}

// An edit can also be code: EditFunc runs on each freshly read document.
// A document kubeadm would refuse is never written.
func ExampleEngine_UpdateDocument_refused() {
	ctx := context.Background()
	client := fakeCluster() // any kubernetes.Interface
	eng := engine.New(client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}, engine.Options{})
	_, err := eng.UpdateDocument(ctx, clusterconfig.EditFunc(func(d *clusterconfig.Document) error {
		return d.Set("networking.podSubnet", "10.244.0.0/33")
	}))
	fmt.Println(err)
	// Output:
	// the result would be invalid, nothing was written: networking.podSubnet: Invalid value: "10.244.0.0/33": couldn't parse subnet
}

// fakeCluster is a fake clientset holding a kubeadm-config, standing in for
// a real client in the examples.
func fakeCluster() *fake.Clientset {
	return fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"},
		Data: map[string]string{engine.DefaultKey: `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
`},
	})
}
