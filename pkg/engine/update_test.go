package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
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

// These unit tests pin the retry decisions of one code path each; the proof
// that concurrent writers lose nothing runs against the real apiserver in
// internal/e2e.

func newFake(failures ...error) (*fake.Clientset, *int) {
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "1"},
		Data:       map[string]string{"k": "0"},
	})
	updates := 0
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		if updates <= len(failures) {
			return true, nil, failures[updates-1]
		}
		return false, nil, nil
	})
	return cs, &updates
}

func increment(runs *int) Mutate {
	return func(cm *corev1.ConfigMap) (bool, error) {
		*runs++
		cm.Data["k"] += "+"
		return true, nil
	}
}

func TestUpdateRetries(t *testing.T) {
	gr := corev1.Resource("configmaps")
	for _, tc := range []struct {
		name         string
		failures     []error
		wantErrCode  exitcode.Code
		wantAttempts int
	}{
		{"first try", nil, exitcode.OK, 1},
		{"conflict then success", []error{apierrors.NewConflict(gr, "kubeadm-config", errors.New("rv"))}, exitcode.OK, 2},
		{"server error is retried", []error{apierrors.NewInternalError(errors.New("boom"))}, exitcode.OK, 2},
		{"throttled is retried", []error{apierrors.NewTooManyRequests("slow down", 0)}, exitcode.OK, 2},
		{"forbidden is not retried", []error{apierrors.NewForbidden(gr, "kubeadm-config", errors.New("no"))}, exitcode.Forbidden, 1},
		{"invalid is not retried", []error{apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind(), "kubeadm-config", nil)}, exitcode.Invalid, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, _ := newFake(tc.failures...)
			runs := 0
			e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{Timeout: 5 * time.Second})
			res, err := e.Update(context.Background(), increment(&runs))
			if got := exitcode.FromError(err); got != tc.wantErrCode {
				t.Fatalf("exit code %d, want %d (%v)", got, tc.wantErrCode, err)
			}
			if res.Attempts != tc.wantAttempts || runs != tc.wantAttempts {
				t.Fatalf("attempts %d, mutate runs %d, want %d", res.Attempts, runs, tc.wantAttempts)
			}
		})
	}
}

func TestUpdateGivesUpWithConflictCode(t *testing.T) {
	gr := corev1.Resource("configmaps")
	conflicts := make([]error, 1000)
	for i := range conflicts {
		conflicts[i] = apierrors.NewConflict(gr, "kubeadm-config", errors.New("rv"))
	}
	cs, _ := newFake(conflicts...)
	runs := 0
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{Timeout: 300 * time.Millisecond})
	res, err := e.Update(context.Background(), increment(&runs))
	if exitcode.FromError(err) != exitcode.Conflict {
		t.Fatalf("want exit 4, got %v", err)
	}
	if res.Conflicts < 2 {
		t.Fatalf("conflicts = %d", res.Conflicts)
	}
}

func TestUpdateUnchangedDoesNotWrite(t *testing.T) {
	cs, updates := newFake()
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{})
	res, err := e.Update(context.Background(), func(*corev1.ConfigMap) (bool, error) { return false, nil })
	if err != nil || res.Changed || *updates != 0 {
		t.Fatalf("changed=%v updates=%d err=%v", res.Changed, *updates, err)
	}
}

// fakeQueue reports writers queued and counts turns; with panicBusy, Busy
// panics.
type fakeQueue struct {
	acquired, released int
	panicBusy          bool
}

func (q *fakeQueue) Busy(context.Context) bool {
	if q.panicBusy {
		panic("busy broke")
	}
	return true
}

func (q *fakeQueue) Acquire(context.Context) (func() error, error) {
	q.acquired++
	return func() error { q.released++; return nil }, nil
}

// TestPanicWhileLookingAtTheQueue: Busy runs in a goroutine of its own; a
// panic there ends the call as an internal error (exit 10) with nothing
// written, whether or not the call had a write to send, instead of ending
// the process.
func TestPanicWhileLookingAtTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate Mutate
	}{
		{"a write to send", increment(new(int))},
		{"nothing to write", func(*corev1.ConfigMap) (bool, error) { return false, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, updates := newFake()
			e := New(cs, testTarget(), Options{Timeout: 5 * time.Second, Coordinator: &fakeQueue{panicBusy: true}})
			_, err := e.Update(context.Background(), tc.mutate)
			if code := exitcode.FromError(err); code != exitcode.Internal || !strings.Contains(err.Error(), "internal error: busy broke") {
				t.Fatalf("exit %d (%v), want %d and the panic", code, err, exitcode.Internal)
			}
			if *updates != 0 {
				t.Fatalf("%d updates sent", *updates)
			}
		})
	}
}

func TestNewcomerGivesWayToQueuedWriters(t *testing.T) {
	cs, updates := newFake()
	q := &fakeQueue{}
	runs := 0
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{Timeout: 5 * time.Second, Coordinator: q})
	res, err := e.Update(context.Background(), increment(&runs))
	if err != nil {
		t.Fatal(err)
	}
	// The first attempt sent nothing and was no conflict; the write came on
	// the writer's turn, which was released.
	if *updates != 1 || res.Conflicts != 0 || !res.Queued || q.acquired != 1 || q.released != 1 || res.Attempts != 2 {
		t.Fatalf("updates %d, conflicts %d, queued %v, acquired %d, released %d, attempts %d",
			*updates, res.Conflicts, res.Queued, q.acquired, q.released, res.Attempts)
	}
}

// lostAnswers makes the first n updates lose their answer: with commit the
// update is applied to the store first (the server committed, the
// connection broke on the way back), without it nothing is applied.
func lostAnswers(cs *fake.Clientset, n int, commit bool) *int {
	sent := 0
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent++
		if sent > n {
			return false, nil, nil
		}
		if commit {
			obj := a.(k8stesting.UpdateAction).GetObject()
			if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"), obj, "kube-system"); err != nil {
				return true, nil, err
			}
		}
		return true, nil, io.ErrUnexpectedEOF
	})
	return &sent
}

// TestLostAnswerIsAppliedOnce: an append whose answer is lost after the
// commit is recognised by its token on the next read, and not appended
// again; one lost before the commit is sent again, once.
func TestLostAnswerIsAppliedOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		commit    bool
		wantSends int
	}{
		{"committed, answer lost", true, 1},
		{"lost before the commit", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, _ := newFake()
			sent := lostAnswers(cs, 1, tc.commit)
			runs := 0
			e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{Timeout: 5 * time.Second})
			res, err := e.Update(context.Background(), increment(&runs))
			if err != nil {
				t.Fatal(err)
			}
			cm, _ := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
			if got := cm.Data["k"]; got != "0+" {
				t.Fatalf("document %q, want one append (0+)", got)
			}
			if *sent != tc.wantSends || res.Recovered != tc.commit {
				t.Fatalf("sent %d writes (want %d), recovered %v", *sent, tc.wantSends, res.Recovered)
			}
		})
	}
}

// TestUnknownOutcomeExits7: a write whose answer is lost, with the server
// unreachable afterwards until the deadline, ends in exit 7, not 4.
func TestUnknownOutcomeExits7(t *testing.T) {
	cs, _ := newFake()
	lostAnswers(cs, 1, true)
	gets := 0
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		if gets > 1 {
			return true, nil, syscall.ECONNREFUSED
		}
		return false, nil, nil
	})
	runs := 0
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{Timeout: 300 * time.Millisecond})
	_, err := e.Update(context.Background(), increment(&runs))
	if got := exitcode.FromError(err); got != exitcode.OutcomeUnknown || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("exit %d (%v), want 7", got, err)
	}
}

// recordingBackup is a Backuper that says where it wrote.
type recordingBackup struct{ calls int }

func (b *recordingBackup) Backup(context.Context, *corev1.ConfigMap, string, *clusterconfig.Document) (string, error) {
	b.calls++
	return "/backups/copy-" + strconv.Itoa(b.calls), nil
}

// A document write reports where the document it replaced was backed up.
func TestDocumentWritesReportTheirBackup(t *testing.T) {
	const doc = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: a\n"
	for _, tc := range []struct {
		name  string
		write func(e *Engine) (*DocumentResult, error)
	}{
		{"UpdateDocument", func(e *Engine) (*DocumentResult, error) {
			return e.UpdateDocument(context.Background(), clusterconfig.EditFunc(func(d *clusterconfig.Document) error {
				return d.Set("clusterName", "b")
			}))
		}},
		{"ReplaceDocument", func(e *Engine) (*DocumentResult, error) {
			return e.ReplaceDocument(context.Background(), []byte(strings.Replace(doc, "a\n", "c\n", 1)),
				func(*corev1.ConfigMap) error { return nil })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "1"},
				Data:       map[string]string{DefaultKey: doc},
			})
			b := &recordingBackup{}
			e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config", Key: DefaultKey}, Options{Backup: b})
			res, err := tc.write(e)
			if err != nil {
				t.Fatal(err)
			}
			if b.calls != 1 || res.Backup != "/backups/copy-1" {
				t.Fatalf("backups taken %d, reported %q", b.calls, res.Backup)
			}
		})
	}
}

// An edit made in an editor is a three-way merge: when another writer
// changes the ConfigMap between the engine's read and its write, the
// conflict makes the engine read again and merge the same edit into the
// newer copy, so both changes are kept.
func TestUpdateDocumentRemergesAfterAConflict(t *testing.T) {
	const doc = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: a\nimageRepository: registry.k8s.io\n"
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "1"},
		Data:       map[string]string{DefaultKey: doc},
	})
	updates := 0
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		if updates > 1 {
			return false, nil, nil
		}
		// Another writer gets in first and changes another field.
		cm, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), "kube-system", "kubeadm-config")
		if err != nil {
			return true, nil, err
		}
		other := cm.(*corev1.ConfigMap).DeepCopy()
		other.Data[DefaultKey] = strings.Replace(doc, "registry.k8s.io", "registry.example.com", 1)
		other.ResourceVersion = "2"
		if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"), other, "kube-system"); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), "kubeadm-config", errors.New("rv"))
	})
	original, err := clusterconfig.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	edited := original.Clone()
	if err := edited.Set("clusterName", "b"); err != nil {
		t.Fatal(err)
	}
	edit, err := clusterconfig.NewThreeWayMerge(original, edited)
	if err != nil {
		t.Fatal(err)
	}
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config", Key: DefaultKey}, Options{Timeout: 5 * time.Second})
	res, err := e.UpdateDocument(context.Background(), edit)
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: kubeadm.k8s.io/v1beta4\nclusterName: b\nimageRepository: registry.example.com\nkind: ClusterConfiguration\n"
	if res.Attempts != 2 || res.Conflicts != 1 || string(res.After) != want {
		t.Fatalf("attempts %d, conflicts %d, wrote:\n%s\nwant:\n%s", res.Attempts, res.Conflicts, res.After, want)
	}
}

// TestUnknownOutcomeIsFinal: when the history after a lost write is gone
// (410), the outcome is unknown at once. The error quotes the lost answer's
// cause, "connection reset by peer"; it must not be taken for a broken
// connection and retried until the deadline while the writer holds its turn
// in the queue (found after an apiserver restart in the SIGKILL storm).
func TestUnknownOutcomeIsFinal(t *testing.T) {
	cs, _ := newFake()
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	sent := 0
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent++
		if sent > 1 {
			return false, nil, nil
		}
		// Another writer changes the ConfigMap, then our answer is lost.
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "2"},
			Data: map[string]string{"k": "other"}}
		if err := cs.Tracker().Update(gvr, other, "kube-system"); err != nil {
			return true, nil, err
		}
		return true, nil, fmt.Errorf("read tcp 127.0.0.1:1->127.0.0.1:2: %w", syscall.ECONNRESET)
	})
	cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewResourceExpired("too old resource version: 1 (2)")
	})
	runs := 0
	e := New(cs, Target{Namespace: "kube-system", Name: "kubeadm-config"}, Options{Timeout: 5 * time.Second})
	res, err := e.Update(context.Background(), increment(&runs))
	if got := exitcode.FromError(err); got != exitcode.OutcomeUnknown {
		t.Fatalf("exit %d (%v), want 7", got, err)
	}
	if res.Attempts != 2 {
		t.Fatalf("%d attempts: an unknown outcome was retried", res.Attempts)
	}
}
