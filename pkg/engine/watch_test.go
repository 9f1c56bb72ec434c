package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// compactedServer is a fake API server whose history before resourceVersion
// 9 is compacted: a watch from an older version is answered 410, as an
// event (etcd, the watch cache) or as the answer to the request; a list
// reads the ConfigMap at 8 (or finds it gone), and a watch from 9 sees the
// next change, at 10.
func compactedServer(t *testing.T, goneAsAnswer, deleted bool) (*fake.Clientset, *[]string) {
	t.Helper()
	cs := fake.NewClientset()
	var mu sync.Mutex
	var watchedFrom []string
	cm := func(rv, state string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: rv},
			Data: map[string]string{"state": state}}
	}
	cs.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}}
		if !deleted {
			list.Items = []corev1.ConfigMap{*cm("8", "relisted")}
		}
		return true, list, nil
	})
	cs.PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
		rv := a.(k8stesting.WatchActionImpl).GetWatchRestrictions().ResourceVersion
		mu.Lock()
		watchedFrom = append(watchedFrom, rv)
		mu.Unlock()
		gone := apierrors.NewResourceExpired("too old resource version: " + rv + " (9)")
		w := watch.NewFakeWithChanSize(1, false)
		switch {
		case rv != "9" && goneAsAnswer:
			return true, nil, gone
		case rv != "9":
			w.Error(&gone.ErrStatus)
		default:
			w.Modify(cm("10", "after"))
		}
		return true, w, nil
	})
	return cs, &watchedFrom
}

// TestWatchRelistsAfterCompaction (upgrade-status --watch): the history
// from the version the watch starts at is compacted. The watch does not end
// with an error (exit 1), nor ask for the lost history for ever: it lists
// the ConfigMap again, hands over the copy read, and watches on from the
// list, so the next change arrives too.
func TestWatchRelistsAfterCompaction(t *testing.T) {
	for _, tc := range []struct {
		name         string
		goneAsAnswer bool
		deleted      bool
		want         []string
	}{
		{"410 event", false, false, []string{"MODIFIED 8 relisted", "MODIFIED 10 after"}},
		{"410 answer", true, false, []string{"MODIFIED 8 relisted", "MODIFIED 10 after"}},
		{"deleted meanwhile", false, true, []string{"DELETED 5 before"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, watchedFrom := compactedServer(t, tc.goneAsAnswer, tc.deleted)
			e := New(cs, testTarget(), Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []string
			err := e.Watch(ctx, "5", func(t watch.EventType, cm *corev1.ConfigMap) (bool, error) {
				if cm.ResourceVersion == "" { // the last copy seen, when none was
					cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5"}, Data: map[string]string{"state": "before"}}
				}
				got = append(got, strings.Join([]string{string(t), cm.ResourceVersion, cm.Data["state"]}, " "))
				return t == watch.Deleted || cm.ResourceVersion == "10", nil
			})
			if err != nil || ctx.Err() != nil {
				t.Fatalf("Watch: %v (context: %v), events %q", err, ctx.Err(), got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if !tc.deleted && (*watchedFrom)[len(*watchedFrom)-1] != "9" {
				t.Errorf("watched from %q: the watch after the list does not start at the list's version", *watchedFrom)
			}
		})
	}
}

// TestWatchPanicInTheWatcher: the watch requests run in client-go's
// RetryWatcher goroutine; a panic there is this call's internal error
// (exit 10), not the end of the process.
func TestWatchPanicInTheWatcher(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		panic("watch broke")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := New(cs, testTarget(), Options{}).Watch(ctx, "5", func(watch.EventType, *corev1.ConfigMap) (bool, error) { return true, nil })
	if exitcode.FromError(err) != exitcode.Internal || !strings.Contains(err.Error(), "internal error: watch broke") {
		t.Fatalf("Watch: %v, want the panic as an internal error", err)
	}
}
