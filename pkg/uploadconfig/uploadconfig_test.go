package uploadconfig

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const upgradeBase = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
certificateValidityPeriod: 8760h
apiServer:
  certSANs:
  - lb.example.com
`

// kubeadmRule is what a kubeadm stand-in does to the document it read, as
// kubeadm 1.37 does (testdata): the target version, a duration in its own
// form, a default filled in.
func kubeadmRule(t *testing.T, read string) string {
	t.Helper()
	d, err := clusterconfig.Parse([]byte(read))
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal(d.JSON(), &tree); err != nil {
		t.Fatal(err)
	}
	patch := map[string]any{"kubernetesVersion": "v1.37.2"}
	if v, ok := tree["certificateValidityPeriod"].(string); ok && strings.HasSuffix(v, "h") {
		patch["certificateValidityPeriod"] = v + "0m0s"
	}
	if _, ok := tree["dns"]; !ok {
		patch["dns"] = map[string]any{}
	}
	js, _ := json.Marshal(patch)
	if err := d.MergePatch(js); err != nil {
		t.Fatal(err)
	}
	return string(d.MustMarshal())
}

// standIn answers as kubeadm would, from the document the cluster holds
// when it is asked; meanwhile, when set, is another writer that changes
// the document right after kubeadm read it (on kubeadm's run-th run).
type standIn struct {
	t         *testing.T
	cluster   *fake.Clientset
	runs      int
	meanwhile func(run int, doc string) string
}

func (k *standIn) Upload(ctx context.Context) (*Upload, error) {
	k.runs++
	cm := getConfigMap(k.t, k.cluster)
	read := cm.Data[clusterConfigurationKey]
	up := &Upload{Read: []byte(read), ResourceVersion: cm.ResourceVersion, Written: []byte(kubeadmRule(k.t, read))}
	if k.meanwhile != nil {
		if doc := k.meanwhile(k.runs, read); doc != read {
			putDocument(k.t, k.cluster, doc)
		}
	}
	return up, nil
}

func getConfigMap(t *testing.T, cs *fake.Clientset) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), "kube-system", "kubeadm-config")
	if err != nil {
		t.Fatal(err)
	}
	return cm.(*corev1.ConfigMap)
}

// putDocument is another writer's write, straight into the fake's store.
func putDocument(t *testing.T, cs *fake.Clientset, doc string) {
	t.Helper()
	cm := getConfigMap(t, cs).DeepCopy()
	cm.Data[clusterConfigurationKey] = doc
	if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"), cm, "kube-system"); err != nil {
		t.Fatal(err)
	}
}

func newCluster(doc string) *fake.Clientset {
	return fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config", ResourceVersion: "1"},
		Data:       map[string]string{clusterConfigurationKey: doc},
	})
}

func appendSAN(t *testing.T, doc, san string) string {
	t.Helper()
	return replace(t, doc, "  - lb.example.com\n", "  - lb.example.com\n  - "+san+"\n")
}

// UpgradeDocument writes kubeadm's change and keeps every other writer's:
// those made after kubeadm read the document are merged in; where another
// writer changed a field kubeadm changes too, kubeadm is asked again and its
// rule applied to the other writer's document is written (kubeadm wins, on
// the newer document); if that keeps happening, nothing is written.
func TestUpgradeDocument(t *testing.T) {
	for _, tc := range []struct {
		name      string
		start     string
		meanwhile func(t *testing.T, run int, doc string) string
		want      string // the stored document afterwards
		runs      int
		changed   bool
		err       string
	}{{
		name:    "nobody else writes: kubeadm's document",
		start:   upgradeBase,
		want:    kubeadmRule(t, upgradeBase),
		runs:    1,
		changed: true,
	}, {
		name:  "an append to apiServer.certSANs after kubeadm read is kept",
		start: upgradeBase,
		meanwhile: func(t *testing.T, run int, doc string) string {
			return appendSAN(t, doc, "appended.example.com")
		},
		want:    kubeadmRule(t, appendSAN(t, upgradeBase, "appended.example.com")),
		runs:    1,
		changed: true,
	}, {
		name:  "kubernetesVersion changed once after kubeadm read: kubeadm asked again, the target written, the other writer's append kept",
		start: upgradeBase,
		meanwhile: func(t *testing.T, run int, doc string) string {
			if run > 1 {
				return doc
			}
			return appendSAN(t, replace(t, doc, "v1.36.3", "v1.37.1"), "appended.example.com")
		},
		want:    kubeadmRule(t, appendSAN(t, upgradeBase, "appended.example.com")),
		runs:    2,
		changed: true,
	}, {
		name:  "a value kubeadm rewrites changed once after kubeadm read: kubeadm's form of the other writer's value",
		start: upgradeBase,
		meanwhile: func(t *testing.T, run int, doc string) string {
			if run > 1 {
				return doc
			}
			return replace(t, doc, "certificateValidityPeriod: 8760h", "certificateValidityPeriod: 9000h")
		},
		want:    replace(t, kubeadmRule(t, upgradeBase), "certificateValidityPeriod: 8760h0m0s", "certificateValidityPeriod: 9000h0m0s"),
		runs:    2,
		changed: true,
	}, {
		name:  "kubernetesVersion changed after each of kubeadm's runs: nothing written",
		start: upgradeBase,
		meanwhile: func(t *testing.T, run int, doc string) string {
			return replace(t, upgradeBase, "v1.36.3", "v1.36.4-"+string(rune('a'+run)))
		},
		want: replace(t, upgradeBase, "v1.36.3", "v1.36.4-d"),
		runs: 3,
		err: `another writer changed fields of kubeadm-config that the upgrade changes, after each of 3 runs of kubeadm: ` +
			`the same fields were changed in the edit and on the live document: kubernetesVersion: was "v1.36.4-c", edited "v1.37.2", live "v1.36.4-d"`,
	}, {
		name:  "already what kubeadm would write: not written again",
		start: kubeadmRule(t, upgradeBase),
		want:  kubeadmRule(t, upgradeBase),
		runs:  1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := newCluster(tc.start)
			k := &standIn{t: t, cluster: cluster}
			if tc.meanwhile != nil {
				k.meanwhile = func(run int, doc string) string { return tc.meanwhile(t, run, doc) }
			}
			eng := engine.New(cluster, Target, engine.Options{Timeout: 5 * time.Second})
			res, err := UpgradeDocument(context.Background(), eng, k)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || exitcode.FromError(err) != exitcode.Conflict {
					t.Fatalf("error:\n got %v (exit %d)\nwant %s (exit 4)", err, exitcode.FromError(err), tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, getConfigMap(t, cluster).Data[clusterConfigurationKey]); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
			if res.KubeadmRuns != tc.runs || k.runs != tc.runs || res.Changed != tc.changed {
				t.Errorf("runs %d (result %d), changed %v; want %d runs, changed %v", k.runs, res.KubeadmRuns, res.Changed, tc.runs, tc.changed)
			}
			if tc.err == "" && string(res.After) != tc.want {
				t.Errorf("the result's After is not what was stored:\n%s", res.After)
			}
		})
	}
}

// An append that lands between the engine's read and its write makes the
// compare-and-swap conflict; the engine merges kubeadm's change into the
// newer document without asking kubeadm again.
func TestUpgradeDocumentAfterACompareAndSwapConflict(t *testing.T) {
	cluster := newCluster(upgradeBase)
	updates := 0
	cluster.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		if updates > 1 {
			return false, nil, nil
		}
		putDocument(t, cluster, appendSAN(t, upgradeBase, "appended.example.com"))
		return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), "kubeadm-config", errors.New("rv"))
	})
	k := &standIn{t: t, cluster: cluster}
	res, err := UpgradeDocument(context.Background(), engine.New(cluster, Target, engine.Options{Timeout: 5 * time.Second}), k)
	if err != nil {
		t.Fatal(err)
	}
	want := kubeadmRule(t, appendSAN(t, upgradeBase, "appended.example.com"))
	if got := getConfigMap(t, cluster).Data[clusterConfigurationKey]; got != want || res.Conflicts != 1 || res.KubeadmRuns != 1 {
		t.Fatalf("conflicts %d, kubeadm runs %d, stored:\n%s\nwant:\n%s", res.Conflicts, res.KubeadmRuns, got, want)
	}
}

// Nothing is written when kubeadm cannot say, or when the engine writes
// another document than kubeadm's.
func TestUpgradeDocumentRefuses(t *testing.T) {
	failing := UploaderFunc(func(context.Context) (*Upload, error) {
		return nil, &KubeadmError{Args: []string{"upgrade", "apply", "phase", "upload-config", "kubeadm", "--config", "x"}, ExitCode: 1, Lines: []string{"error: boom"}}
	})
	cluster := newCluster(upgradeBase)
	_, err := UpgradeDocument(context.Background(), engine.New(cluster, Target, engine.Options{}), failing)
	if want := "kubeadm upgrade apply phase upload-config kubeadm --dry-run exited 1: error: boom"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	other := engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: "Other"}
	_, err = UpgradeDocument(context.Background(), engine.New(cluster, other, engine.Options{}), &standIn{t: t, cluster: cluster})
	if want := "kubeadm's upload-config writes configmap kube-system/kubeadm-config key ClusterConfiguration, not configmap kube-system/kubeadm-config key Other"; err == nil ||
		err.Error() != want || exitcode.FromError(err) != exitcode.Usage {
		t.Errorf("got %v, want %s (exit 2)", err, want)
	}
	if got := getConfigMap(t, cluster).Data[clusterConfigurationKey]; got != upgradeBase {
		t.Errorf("written:\n%s", got)
	}
}
