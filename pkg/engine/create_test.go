package engine

import (
	"context"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// listVersions makes the collection reads answer these resourceVersions in
// turn (the last one from then on), with no items.
func listVersions(cs *fake.Clientset, rvs ...string) {
	calls := 0
	cs.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		rv := rvs[min(calls, len(rvs)-1)]
		calls++
		return true, &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}, nil
	})
}

// bookmark is the watch event that says the history up to rv was sent.
func bookmark(rv string) watch.Event {
	return watch.Event{Type: watch.Bookmark, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}}
}

// A change the server makes while our create's answer is on its way: ours
// (carrying the token), theirs, or a deletion.
type change func(token string) *corev1.ConfigMap

func ours(rv, k string) change {
	return func(token string) *corev1.ConfigMap { return configMap(rv, k, token) }
}
func theirs(rv, k string) change {
	return func(string) *corev1.ConfigMap { return configMap(rv, k, "") }
}

var deleted change = func(string) *corev1.ConfigMap { return nil }

// TestLostCreate (E4): a create carries no precondition, so "absent now"
// does not mean "ours never landed", and the first creation after the
// collection's resourceVersion need not be ours. The history from there up
// to now decides: a copy with our token means ours landed (exit 0, not
// created again); other events for the name with the object gone mean it
// cannot be told (exit 7); no event at all means ours has not landed, and
// it is sent again.
func TestLostCreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		// happen is what the server does before our create's answer is lost.
		happen []change
		// lists are the collection's resourceVersions, read in turn.
		lists []string
		// history is what a watch from resourceVersion 1 sends.
		history       func(token string) []watch.Event
		wantCode      exitcode.Code
		wantCreates   int
		wantRecovered bool
		wantData      string // "" when the ConfigMap must be gone
	}{
		{
			name:   "ours landed, then someone deleted it",
			happen: []change{ours("2", "+"), deleted},
			lists:  []string{"1", "3"},
			history: func(token string) []watch.Event {
				return []watch.Event{{Type: watch.Added, Object: configMap("2", "+", token)},
					{Type: watch.Deleted, Object: configMap("3", "+", token)}, bookmark("3")}
			},
			wantCode: exitcode.OK, wantCreates: 1, wantRecovered: true,
		},
		{
			name:   "someone created and deleted it, ours landed, someone overwrote the token",
			happen: []change{theirs("2", "theirs"), deleted, ours("4", "+"), theirs("5", "+*")},
			lists:  []string{"1"},
			history: func(token string) []watch.Event {
				return []watch.Event{{Type: watch.Added, Object: configMap("2", "theirs", "")},
					{Type: watch.Deleted, Object: configMap("3", "theirs", "")},
					{Type: watch.Added, Object: configMap("4", "+", token)},
					{Type: watch.Modified, Object: configMap("5", "+*", "")}}
			},
			wantCode: exitcode.OK, wantCreates: 1, wantRecovered: true, wantData: "+*",
		},
		{
			name:   "ours did not land, someone created and deleted it",
			happen: []change{theirs("2", "theirs"), deleted},
			lists:  []string{"1", "4"},
			history: func(string) []watch.Event {
				return []watch.Event{{Type: watch.Added, Object: configMap("2", "theirs", "")},
					{Type: watch.Deleted, Object: configMap("3", "theirs", "")}, bookmark("4")}
			},
			wantCode: exitcode.OutcomeUnknown, wantCreates: 1,
		},
		{
			name:   "ours did not land, someone created it",
			happen: []change{theirs("2", "theirs")},
			lists:  []string{"1"},
			history: func(string) []watch.Event {
				return []watch.Event{{Type: watch.Added, Object: configMap("2", "theirs", "")}}
			},
			wantCode: exitcode.OK, wantCreates: 1, wantData: "theirs+",
		},
		{
			name:     "ours did not land, nothing happened",
			lists:    []string{"1"},
			wantCode: exitcode.OK, wantCreates: 2, wantData: "+",
		},
		{
			// The history of the name is empty and sends no bookmark: it
			// ends in quiet.
			name:     "ours did not land, other ConfigMaps changed",
			lists:    []string{"1", "7"},
			history:  func(string) []watch.Event { return nil },
			wantCode: exitcode.OK, wantCreates: 2, wantData: "+",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			listVersions(cs, tc.lists...)
			creates, token := 0, ""
			cs.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if creates++; creates > 1 {
					return false, nil, nil
				}
				token = a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).Annotations[WriteIDAnnotation]
				for _, c := range tc.happen {
					if err := apply(cs, c(token)); err != nil {
						return true, nil, err
					}
				}
				return true, nil, io.ErrUnexpectedEOF
			})
			var watchedFrom []string
			cs.PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
				watchedFrom = append(watchedFrom, a.(k8stesting.WatchAction).GetWatchRestrictions().ResourceVersion)
				var evs []watch.Event
				if tc.history != nil {
					evs = tc.history(token)
				}
				w := watch.NewFakeWithChanSize(len(evs), false)
				for _, ev := range evs {
					w.Action(ev.Type, ev.Object)
				}
				return true, w, nil
			})
			runs := 0
			e := New(cs, testTarget(), Options{Timeout: 3 * time.Second, CreateIfMissing: true})
			res, err := e.Update(context.Background(), appendToEmpty(&runs))
			if got := exitcode.FromError(err); got != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d", got, err, tc.wantCode)
			}
			if creates != tc.wantCreates || res.Recovered != tc.wantRecovered {
				t.Fatalf("%d creates sent, recovered %v; want %d, %v", creates, res.Recovered, tc.wantCreates, tc.wantRecovered)
			}
			for _, rv := range watchedFrom {
				if rv != "1" {
					t.Fatalf("watched from %v, want the collection's resourceVersion before the create (1)", watchedFrom)
				}
			}
			cm, getErr := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
			switch {
			case tc.wantData == "" && getErr == nil:
				t.Fatalf("the ConfigMap was created again: %v", cm.Data)
			case tc.wantData != "" && (getErr != nil || cm.Data["k"] != tc.wantData):
				t.Fatalf("document %v (%v), want %q", cm, getErr, tc.wantData)
			}
		})
	}
}

// apply makes one change to the fake store: cm created or replaced, or
// kubeadm-config deleted when cm is nil.
func apply(cs *fake.Clientset, cm *corev1.ConfigMap) error {
	tracker := cs.Tracker()
	if cm == nil {
		return tracker.Delete(cmGVR, "kube-system", "kubeadm-config")
	}
	if _, err := tracker.Get(cmGVR, "kube-system", cm.Name); err == nil {
		return tracker.Update(cmGVR, cm, "kube-system")
	}
	return tracker.Create(cmGVR, cm, "kube-system")
}
