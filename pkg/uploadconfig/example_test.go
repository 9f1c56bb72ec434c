package uploadconfig_test

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/uploadconfig"
)

// At the point of `kubeadm upgrade apply` where kubeadm would upload its
// ClusterConfiguration, an agent writes kubeadm's change through the engine
// instead. Here kubeadm's answer is given (an agent passes
// uploadconfig.Kubeadm{Path: kubeadm, Config: upgradeConfiguration}, which
// asks the real kubeadm), and another writer appends a certSAN after
// kubeadm read the document: kubeadm's change is merged into the newer
// document, and the append stays.
func Example() {
	ctx := context.Background()
	const read = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n"
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"},
		Data:       map[string]string{"ClusterConfiguration": read},
	})
	eng := engine.New(client, uploadconfig.Target, engine.Options{FieldManager: "kubeadmcfg-agent"})
	kubeadm := uploadconfig.UploaderFunc(func(ctx context.Context) (*uploadconfig.Upload, error) {
		up := &uploadconfig.Upload{Read: []byte(read), Written: []byte(strings.Replace(read, "v1.36.3", "v1.37.2", 1))}
		// Another writer, right after kubeadm read the document.
		cm, _ := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
		cm.Data["ClusterConfiguration"] += "apiServer:\n  certSANs:\n  - lb.example.com\n"
		_, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
		return up, err
	})
	res, err := uploadconfig.UpgradeDocument(ctx, eng, kubeadm)
	if err != nil {
		panic(err) // carries its exit code: exitcode.FromError(err)
	}
	fmt.Printf("kubeadm would have written:\n%s\nthe engine wrote:\n%s", res.Upload.Written, res.After)
	// Output:
	// kubeadm would have written:
	// apiVersion: kubeadm.k8s.io/v1beta4
	// kind: ClusterConfiguration
	// kubernetesVersion: v1.37.2
	//
	// the engine wrote:
	// apiServer:
	//   certSANs:
	//   - lb.example.com
	// apiVersion: kubeadm.k8s.io/v1beta4
	// kind: ClusterConfiguration
	// kubernetesVersion: v1.37.2
}
