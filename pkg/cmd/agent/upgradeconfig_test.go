package agent

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const upgradeDocument = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
networking:
  serviceSubnet: 10.96.0.0/12
`

// The upgrade's write of kubeadm-config refuses what validation finds
// invalid (exit 3, nothing written), and backs up the document it
// replaces as one from before an upgrade, not before a restore.
func TestTheUpgradesConfigEngine(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config", UID: "uid-1", ResourceVersion: "1"},
		Data: map[string]string{engine.DefaultKey: upgradeDocument}})
	store := &backup.Store{Dir: t.TempDir()}
	target := engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}
	eng := upgradeConfigEngine(client, target, &backup.Hook{Store: store, Keep: 10, Server: "https://192.0.2.10:6443", Reason: backup.ReasonBeforeUpgrade})

	invalid, err := clusterconfig.NewSet("networking.serviceSubnet", "not-a-cidr")
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.UpdateDocument(ctx, invalid)
	if exitcode.FromError(err) != exitcode.Invalid {
		t.Errorf("an invalid result: got %v (exit %d), want refused with exit %d", err, exitcode.FromError(err), exitcode.Invalid)
	}
	if doc, _ := eng.Document(ctx); doc != upgradeDocument {
		t.Errorf("the invalid result was written:\n%s", doc)
	}

	upgrade, err := clusterconfig.NewSet("kubernetesVersion", "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.UpdateDocument(ctx, upgrade); err != nil {
		t.Fatal(err)
	}
	names, err := store.List()
	if err != nil || len(names) != 1 {
		t.Fatalf("backups %v (%v), want one", names, err)
	}
	b, err := store.Read(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if b.Reason != backup.ReasonBeforeUpgrade || !strings.Contains(string(b.Document), "kubernetesVersion: v1.36.3") {
		t.Errorf("the backup says %q of:\n%s", b.Reason, b.Document)
	}
}
