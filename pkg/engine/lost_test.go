package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The tests in this file pin how a write whose answer was lost is resolved,
// one code path each: every way it can end is exit 0 (landed once) or exit
// 7 (cannot be told), never a code that says "not written". Every edit is
// an append, so a second application shows.

var cmGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

func testTarget() Target { return Target{Namespace: "kube-system", Name: "kubeadm-config"} }

// configMap is kubeadm-config at resourceVersion rv holding k, carrying
// the write id token when it is not empty.
func configMap(rv, k, token string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: rv},
		Data:       map[string]string{"k": k},
	}
	if token != "" {
		cm.Annotations = map[string]string{WriteIDAnnotation: token}
	}
	return cm
}

// commitThenOverwrite makes the first update commit (at resourceVersion 2),
// lets another writer append "*" without our token (3), and loses the
// answer to ours: the live copy no longer says that ours landed, only the
// history does. It returns the copy our write made, once it is made.
func commitThenOverwrite(cs *fake.Clientset) func() *corev1.ConfigMap {
	var mu sync.Mutex
	var ours *corev1.ConfigMap
	sent := 0
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if sent++; sent > 1 {
			return false, nil, nil
		}
		ours = a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		ours.ResourceVersion = "2"
		other := ours.DeepCopy()
		other.ResourceVersion, other.Annotations = "3", nil
		other.Data["k"] += "*"
		if err := cs.Tracker().Update(cmGVR, other, "kube-system"); err != nil {
			return true, nil, err
		}
		return true, nil, io.ErrUnexpectedEOF
	})
	return func() *corev1.ConfigMap {
		mu.Lock()
		defer mu.Unlock()
		return ours.DeepCopy()
	}
}

// watches answers the engine's watches in turn: each script is what one
// watch delivers, an error refuses the watch, and a nil script is a watch
// the server closes before any event. Past the last script, watches are
// refused as forbidden.
func watches(cs *fake.Clientset, scripts ...func() ([]watch.Event, error)) *int {
	calls := 0
	cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		calls++
		if calls > len(scripts) {
			return true, nil, apierrors.NewForbidden(cmGVR.GroupResource(), "", errors.New("no more watches"))
		}
		script := scripts[calls-1]
		if script == nil {
			w := watch.NewFake()
			w.Stop() // closed, as client-go does on EOF
			return true, w, nil
		}
		events, err := script()
		if err != nil {
			return true, nil, err
		}
		w := watch.NewFakeWithChanSize(len(events), false)
		for _, ev := range events {
			w.Action(ev.Type, ev.Object)
		}
		return true, w, nil
	})
	return &calls
}

func refused(err error) func() ([]watch.Event, error) {
	return func() ([]watch.Event, error) { return nil, err }
}

func events(evs ...watch.Event) func() ([]watch.Event, error) {
	return func() ([]watch.Event, error) { return evs, nil }
}

// wantUnknown fails unless err is exit 7 (outcome unknown).
func wantUnknown(t *testing.T, err error) {
	t.Helper()
	if got := exitcode.FromError(err); got != exitcode.OutcomeUnknown || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("exit %d (%v), want 7", got, err)
	}
}

func forbidden(verb string) error {
	return apierrors.NewForbidden(cmGVR.GroupResource(), "kubeadm-config", fmt.Errorf("cannot %s", verb))
}

// TestPendingWriteEndsInUnknown (E1): once a write's answer is lost, every
// way an update can fail for good is exit 7: the watch that would tell is
// refused (as deploy/rbac.yaml did before it granted watch) or ends in an
// Error event; the re-read, or the collection read of a create, is
// refused; the backup before re-sending fails.
func TestPendingWriteEndsInUnknown(t *testing.T) {
	forbiddenAfterFirst := func(verb string) k8stesting.ReactionFunc {
		calls := 0
		return func(k8stesting.Action) (bool, runtime.Object, error) {
			if calls++; calls > 1 {
				return true, nil, forbidden(verb)
			}
			return false, nil, nil
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(cs *fake.Clientset) Options
	}{
		{"watch forbidden", func(cs *fake.Clientset) Options {
			commitThenOverwrite(cs)
			watches(cs, refused(forbidden("watch")))
			return Options{}
		}},
		{"watch ends in an Error event", func(cs *fake.Clientset) Options {
			commitThenOverwrite(cs)
			watches(cs, events(watch.Event{Type: watch.Error, Object: &apierrors.NewBadRequest("no").ErrStatus}))
			return Options{}
		}},
		{"get forbidden", func(cs *fake.Clientset) Options {
			lostAnswers(cs, 1, false)
			cs.PrependReactor("get", "configmaps", forbiddenAfterFirst("get"))
			return Options{}
		}},
		{"backup fails", func(cs *fake.Clientset) Options {
			lostAnswers(cs, 1, false)
			return Options{Backup: &failingBackup{after: 1}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(configMap("1", sanDoc, ""))
			opts := tc.setup(cs)
			opts.Timeout = 5 * time.Second
			e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config", Key: "k"}, opts)
			_, err := e.UpdateDocument(context.Background(), appendSANEdit(t, "ours"))
			wantUnknown(t, err)
		})
	}
	t.Run("list forbidden", func(t *testing.T) {
		cs := fake.NewClientset()
		lostCreates(cs, 1, false)
		cs.PrependReactor("list", "configmaps", forbiddenAfterFirst("list"))
		e := New(cs, testTarget(), Options{Timeout: 5 * time.Second, CreateIfMissing: true})
		runs := 0
		_, err := e.Update(context.Background(), appendToEmpty(&runs))
		wantUnknown(t, err)
	})
}

// TestClosedWatchIsRetried (E1): the watch that resolves a lost write is
// closed by the server before its first event (an API server restart, a
// proxy's idle close). That is a broken connection: it is watched again,
// the history shows the write landed, and it is not applied twice.
func TestClosedWatchIsRetried(t *testing.T) {
	cs := fake.NewClientset(configMap("1", "0", ""))
	ours := commitThenOverwrite(cs)
	calls := watches(cs, nil, func() ([]watch.Event, error) {
		return []watch.Event{{Type: watch.Modified, Object: ours()}}, nil
	})
	runs := 0
	e := New(cs, testTarget(), Options{Timeout: 5 * time.Second})
	res, err := e.Update(context.Background(), increment(&runs))
	if err != nil {
		t.Fatal(err)
	}
	if got := liveData(t, cs); got != "0+*" || !res.Recovered || *calls != 2 {
		t.Fatalf("document %q (want our append once, then the other writer's), recovered %v, %d watches", got, res.Recovered, *calls)
	}
}

// TestLandedWriteAnsweredWithConflict (E2): the write landed but the
// answer the engine got is a conflict (client-go re-sent it by itself after
// a 503 with Retry-After, and the copy met our own write). The token on the
// copy read next says ours landed: the edit is not applied again.
func TestLandedWriteAnsweredWithConflict(t *testing.T) {
	cs := fake.NewClientset(configMap("1", "0", ""))
	sent := 0
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if sent++; sent > 1 {
			return false, nil, nil
		}
		ours := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		ours.ResourceVersion = "2"
		if err := cs.Tracker().Update(cmGVR, ours, "kube-system"); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(cmGVR.GroupResource(), "kubeadm-config", errors.New("the object has been modified"))
	})
	runs := 0
	e := New(cs, testTarget(), Options{Timeout: 5 * time.Second})
	res, err := e.Update(context.Background(), increment(&runs))
	if err != nil {
		t.Fatal(err)
	}
	if got := liveData(t, cs); got != "0+" || sent != 1 || !res.Recovered || !res.Changed {
		t.Fatalf("document %q (want one append), %d writes sent, recovered %v", got, sent, res.Recovered)
	}
}

// TestLostUpdateThenDeleted (E3): an update whose answer was lost before
// the commit, and then someone deletes the ConfigMap: nothing of ours was
// written and there is nothing to write to. Exit 5, not a panic.
func TestLostUpdateThenDeleted(t *testing.T) {
	cs := fake.NewClientset(configMap("1", "0", ""))
	sent := 0
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if sent++; sent > 1 {
			return false, nil, nil
		}
		if err := cs.Tracker().Delete(cmGVR, "kube-system", "kubeadm-config"); err != nil {
			return true, nil, err
		}
		return true, nil, io.ErrUnexpectedEOF
	})
	watches(cs, events(watch.Event{Type: watch.Deleted, Object: configMap("2", "0", "")}))
	runs := 0
	e := New(cs, testTarget(), Options{Timeout: 5 * time.Second})
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		_, err = e.Update(context.Background(), increment(&runs))
		return err
	}()
	if got := exitcode.FromError(err); got != exitcode.NotFound || sent != 1 {
		t.Fatalf("exit %d (%v), %d writes sent; want exit 5 and one write", got, err, sent)
	}
}

// TestPendingDeleteEndsInUnknown (E1): the same for Delete: a lost delete
// whose re-read or resolving watch is refused, or whose check refuses the
// copy it would send again, is exit 7, not 6 or the check's code.
func TestPendingDeleteEndsInUnknown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit bool
		setup  func(cs *fake.Clientset)
	}{
		{"get forbidden", false, func(cs *fake.Clientset) {
			gets := 0
			cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				if gets++; gets > 1 {
					return true, nil, forbidden("get")
				}
				return false, nil, nil
			})
		}},
		{"watch forbidden", true, func(cs *fake.Clientset) {
			watches(cs, refused(forbidden("watch")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(configMap("1", "0", ""))
			sent := 0
			cs.PrependReactor("delete", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				if sent++; sent > 1 {
					return false, nil, nil
				}
				if tc.commit {
					if err := cs.Tracker().Delete(cmGVR, "kube-system", "kubeadm-config"); err != nil {
						return true, nil, err
					}
				}
				return true, nil, io.ErrUnexpectedEOF
			})
			tc.setup(cs)
			e := New(cs, testTarget(), Options{Timeout: 5 * time.Second})
			_, err := e.Delete(context.Background(), func(*corev1.ConfigMap) error { return nil })
			wantUnknown(t, err)
		})
	}
	t.Run("check refuses the copy", func(t *testing.T) {
		cs := fake.NewClientset(configMap("1", "0", ""))
		lost := 0
		cs.PrependReactor("delete", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			lost++
			return true, nil, io.ErrUnexpectedEOF
		})
		checks := 0
		e := New(cs, testTarget(), Options{Timeout: 5 * time.Second})
		_, err := e.Delete(context.Background(), func(*corev1.ConfigMap) error {
			if checks++; checks > 1 {
				return exitcode.Conflictf("the upgrade is in progress")
			}
			return nil
		})
		wantUnknown(t, err)
	})
}

// liveData is the k of the live kubeadm-config.
func liveData(t *testing.T, cs *fake.Clientset) string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["k"]
}

// sanDoc is a ClusterConfiguration with a list to append to.
const sanDoc = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\napiServer:\n  certSANs: [a]\n"

func appendSANEdit(t *testing.T, san string) clusterconfig.Edit {
	t.Helper()
	edit, err := clusterconfig.NewSet("apiServer.certSANs[+]", san)
	if err != nil {
		t.Fatal(err)
	}
	return edit
}

// failingBackup backs up after times, then fails.
type failingBackup struct{ after, calls int }

func (b *failingBackup) Backup(context.Context, *corev1.ConfigMap, string, *clusterconfig.Document) (string, error) {
	if b.calls++; b.calls > b.after {
		return "", exitcode.Failuref("the backup directory is full")
	}
	return "/backups/copy", nil
}

// appendToEmpty appends "+" to k, starting from an empty ConfigMap when
// the engine creates it.
func appendToEmpty(runs *int) Mutate {
	return func(cm *corev1.ConfigMap) (bool, error) {
		*runs++
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["k"] += "+"
		return true, nil
	}
}

// lostCreates loses the answer to the first n creates, after the commit
// (at resourceVersion 2) or before it.
func lostCreates(cs *fake.Clientset, n int, commit bool) *int {
	sent := 0
	cs.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if sent++; sent > n {
			return false, nil, nil
		}
		if commit {
			obj := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
			obj.ResourceVersion = "2"
			if err := cs.Tracker().Create(cmGVR, obj, "kube-system"); err != nil {
				return true, nil, err
			}
		}
		return true, nil, io.ErrUnexpectedEOF
	})
	return &sent
}
