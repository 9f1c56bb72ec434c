package reconfigure

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const document = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n"

func configMap(rv, doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config", UID: "uid-1", ResourceVersion: rv},
		Data:       map[string]string{engine.DefaultKey: doc},
	}
}

func newRun(t *testing.T, source Source, live ...*corev1.ConfigMap) *run {
	t.Helper()
	client := fake.NewClientset()
	for _, cm := range live {
		if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	target := engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}
	return &run{node: Node{Config: engine.New(client, target, engine.Options{}), Store: &backup.Store{Dir: t.TempDir()}},
		req: Request{Source: source}}
}

// A pinned copy is applied as it is: the live ConfigMap, which here holds
// another document, is not even read.
func TestSourcePinnedIsNotReadFromTheAPI(t *testing.T) {
	pinned := configMap("812", document)
	r := newRun(t, Source{Pinned: pinned}, configMap("815", document+"clusterName: other\n"))
	src, err := r.source(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(document, string(src.document)); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
	if want := "the pinned ClusterConfiguration (resourceVersion 812)"; src.label != want || src.cm != pinned || src.apiVersion != "kubeadm.k8s.io/v1beta4" {
		t.Errorf("got label %q, configmap %v, apiVersion %q", src.label, src.cm, src.apiVersion)
	}
}

func TestSourceLive(t *testing.T) {
	r := newRun(t, Source{}, configMap("815", document))
	src, err := r.source(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := "the live ClusterConfiguration (resourceVersion 815)"; src.label != want || string(src.document) != document {
		t.Errorf("got %q: %q", src.label, src.document)
	}
}

func TestSourceRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		source Source
		live   *corev1.ConfigMap
		code   exitcode.Code
		want   string
	}{
		{"two sources", Source{Backup: "b", Pinned: configMap("1", document)}, nil, exitcode.Usage,
			"choose one ClusterConfiguration to apply: a backup, the last known good or a pinned copy"},
		{"pinned garbage", Source{Pinned: configMap("1", "kind: [")}, nil, exitcode.Invalid,
			"the pinned ClusterConfiguration cannot be applied: "},
		{"no live ConfigMap", Source{}, nil, exitcode.NotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var live []*corev1.ConfigMap
			if tc.live != nil {
				live = append(live, tc.live)
			}
			_, err := newRun(t, tc.source, live...).source(context.Background())
			if exitcode.FromError(err) != tc.code || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got exit %d: %v; want exit %d: %s", exitcode.FromError(err), err, tc.code, tc.want)
			}
		})
	}
}

// backup list shows, beside each backup, every node whose last known good
// it is.
func TestLastKnownGoods(t *testing.T) {
	store := &backup.Store{Dir: t.TempDir()}
	save := func(rv string) *backup.Backup {
		b, err := store.Save(configMap(rv, document), engine.DefaultKey, "https://127.0.0.1:6443", backup.ReasonReconfigure, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	older, newer := save("812"), save("815")
	for _, mark := range []struct {
		b    *backup.Backup
		node string
	}{{older, "cp-0"}, {newer, "cp-1"}, {newer, "cp-2"}, {older, "cp-1"}} { // cp-1 went back
		if err := store.MarkLastGood(mark.b, mark.node); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LastKnownGoods(store)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{older.Name: {"cp-0", "cp-1"}, newer.Name: {"cp-2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
