package engine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// TestEveryDocumentWriteSaysWhatItReplaced: whichever way the engine writes
// the document (an edit, a replace, a plain Update as the agent's revert
// makes), the same write stamps the hash of the document written and of the
// one it replaced; a write that leaves the document alone leaves them alone;
// a write by anyone else leaves them disagreeing with the document.
func TestEveryDocumentWriteSaysWhatItReplaced(t *testing.T) {
	ctx := context.Background()
	docA := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: a\n"
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "1"},
		Data:       map[string]string{DefaultKey: docA, "ClusterStatus": "x"},
	})
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config", Key: DefaultKey}, Options{Timeout: 5 * time.Second, Validation: ValidationIgnore})
	live := func() *corev1.ConfigMap {
		t.Helper()
		cm, err := e.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	want := func(step, replaced string, known bool) {
		t.Helper()
		got, ok := Replaced(live(), e.Target())
		if got != replaced || ok != known {
			t.Fatalf("%s: replaced %q (known %v), want %q (known %v); annotations %v", step, got, ok, replaced, known, live().Annotations)
		}
	}
	want("never written by the plugin", "", false)

	set, err := clusterconfig.NewSet("clusterName", "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.UpdateDocument(ctx, set); err != nil {
		t.Fatal(err)
	}
	docB := live().Data[DefaultKey]
	want("an edit", clusterconfig.Hash([]byte(docA)), true)

	if _, err := e.ReplaceDocument(ctx, []byte(docA), func(*corev1.ConfigMap) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want("a replace", clusterconfig.Hash([]byte(docB)), true)

	docC := docA + "controlPlaneEndpoint: lb:6443\n"
	if _, err := e.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) { cm.Data[DefaultKey] = docC; return true, nil }); err != nil {
		t.Fatal(err)
	}
	want("a plain update", clusterconfig.Hash([]byte(docA)), true)
	if got := live().Annotations[DocumentHashAnnotation]; got != clusterconfig.Hash([]byte(docC)) {
		t.Fatalf("document hash %s, want that of the document written", got)
	}

	if _, err := e.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) { cm.Data["ClusterStatus"] = "y"; return true, nil }); err != nil {
		t.Fatal(err)
	}
	want("another key written", clusterconfig.Hash([]byte(docA)), true)

	// kubectl edit, kubeadm upload-config: the annotations stay as they were.
	cm := live()
	cm.Data[DefaultKey] = docB
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("written by someone else", "", false)
}
