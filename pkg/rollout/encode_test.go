package rollout

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
)

const golden = "testdata/valid-awaiting-confirm.yaml"

// awaitingConfirm is a record with a history, a try, a resumed node and
// every field set that a rollout sets.
func awaitingConfirm(t *testing.T) *Record {
	t.Helper()
	r := started(t, spec())
	for i, n := range cps {
		turn(t, r, 10*i, n, NodeUpdated)
	}
	if err := r.Start(by("alice", 100), spec(func(s *Spec) {
		s.Target, s.Previous, s.Source, s.Canary, s.Try, s.Message = docV3, nil, SourceLive, 1, 20*time.Second, "rename the cluster"
		s.Replaced = Hash(docV2) // kubeadm-config says: docV3 replaced rollout 1's target
	})); err != nil {
		t.Fatal(err)
	}
	turn(t, r, 110, "cp-0", NodeUpdated)
	if _, err := r.Resume(by("bob", 120)); err != nil {
		t.Fatal(err)
	}
	if err := r.BeginNode(by("agent-cp-1", 130), 2, "cp-1", []string{"kube-apiserver", "kube-controller-manager"}, "kubeadm-config-0007"); err != nil {
		t.Fatal(err)
	}
	if err := r.ResumeNode(by("agent-cp-1-restarted", 140), 2, "cp-1"); err != nil {
		t.Fatal(err)
	}
	if err := r.FinishNode(by("agent-cp-1-restarted", 150), 2, "cp-1", Outcome{Phase: NodeUpdated, Components: []string{"kube-apiserver"}}); err != nil {
		t.Fatal(err)
	}
	turn(t, r, 160, "cp-2", NodeUnchanged)
	return r
}

func toConfigMap(t *testing.T, r *Record) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultConfigMap}}
	if err := r.ToConfigMap(cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// TestRoundTrip: what is stored reads back the same, and reads as the
// golden file shows it (kubectl get -o yaml shows the same data).
func TestRoundTrip(t *testing.T) {
	r := awaitingConfirm(t)
	cm := toConfigMap(t, r)
	if cm.Labels[managed.Label] != managed.By || cm.Data[KeyTarget] != string(docV3) || cm.Data[KeyPrevious] != string(docV2) {
		t.Fatalf("labels %v, documents not byte for byte", cm.Labels)
	}
	got, err := FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(r, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	text, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if d := cmp.Diff(string(want), string(text)); d != "" {
		t.Errorf("the record differs from %s (-want +got):\n%s", golden, d)
	}
	// The empty record: nothing stored, nothing read.
	empty := toConfigMap(t, &Record{})
	if len(empty.Data) != 0 {
		t.Errorf("empty record stored %v", empty.Data)
	}
	if r, err := FromConfigMap(&corev1.ConfigMap{}); err != nil || r.Status != nil || r.History != nil {
		t.Errorf("no data: %+v %v", r, err)
	}
}

// goldenConfigMap reads the golden record, as a hand edit starts from.
func goldenConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(data, cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestDamagedRecords(t *testing.T) {
	const prefix = "the rollout record kube-system/kubeadmcfg-rollout is damaged: "
	const suffix = "; fix or delete it"
	goldenSize := dataBytes(goldenConfigMap(t).Data)
	edit := func(key, old, replacement string) func(map[string]string) {
		return func(d map[string]string) {
			if !strings.Contains(d[key], old) {
				t.Fatalf("data.%s has no %q", key, old)
			}
			d[key] = strings.Replace(d[key], old, replacement, 1)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		key  string
		want string
	}{
		{"garbage status", func(d map[string]string) { d[KeyStatus] = "id: [1\n" }, KeyStatus,
			"data.status: error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'"},
		{"status not a map", func(d map[string]string) { d[KeyStatus] = "- 1\n" }, KeyStatus,
			"data.status: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type rollout.Status"},
		{"unknown field in the status", edit(KeyStatus, "kind: rollout\n", "kind: rollout\nowner: me\n"), KeyStatus,
			`data.status: error unmarshaling JSON: while decoding JSON: json: unknown field "owner"`},
		{"unknown field in a node", edit(KeyStatus, "  starts: 1\n", "  starts: 1\n  retries: 2\n"), KeyStatus,
			`data.status: error unmarshaling JSON: while decoding JSON: json: unknown field "retries"`},
		{"a key twice", edit(KeyStatus, "kind: rollout\n", "kind: rollout\nkind: undo\n"), KeyStatus,
			`data.status: error converting YAML to JSON: yaml: unmarshal errors:` + "\n" + `  line 3: key "kind" already set in map`},
		{"an alias in its own value", edit(KeyStatus, "kind: rollout\n", "kind: &k rollout\nx: &x [*x]\n"), KeyStatus,
			`data.status: YAML alias *x on line 3 is inside the value it names, so its expansion never ends; write the value out in full`},
		{"a bad time", edit(KeyStatus, "startedAt: \"2026-11-30T12:01:40Z\"\nstartedBy", "startedAt: yesterday\nstartedBy"), KeyStatus,
			`data.status: error unmarshaling JSON: while decoding JSON: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`},
		{"empty status", func(d map[string]string) { d[KeyStatus] = "" }, KeyStatus,
			`data.status: id must be at least 1, not 0; kind must be one of rollout, undo, revert, not ""; phase must be one of Progressing, Paused, AwaitingConfirm, Reverting, Succeeded, Failed, not ""; target.hash "" is not sha256: and 64 lowercase hex digits; a rollout of kind  needs a previous document`},
		{"unknown phase", edit(KeyStatus, "phase: AwaitingConfirm", "phase: Done"), KeyStatus,
			`data.status: phase must be one of Progressing, Paused, AwaitingConfirm, Reverting, Succeeded, Failed, not "Done"`},
		{"two nodes in progress", func(d map[string]string) {
			d[KeyStatus] = strings.Replace(strings.Replace(d[KeyStatus], "phase: Updated", "phase: InProgress", 2), "phase: AwaitingConfirm", "phase: Progressing", 1)
		}, KeyStatus, "data.status: node cp-1 is InProgress, but cp-0 before it is not done; node cp-2 is Unchanged, but cp-0 before it is not done; " +
			"nodes cp-0, cp-1 are in progress at once"},
		{"a node after a pending one", edit(KeyStatus, "phase: Updated\n  resumes: 0\n  startedAt: \"2026-11-30T12:01:50Z\"\n  starts: 1", "phase: Pending\n  starts: 0"), KeyStatus,
			"data.status: node cp-1 is Updated, but cp-0 before it is not done; node cp-2 is Unchanged, but cp-0 before it is not done; " +
				"the rollout is AwaitingConfirm, but node cp-0 is not done"},
		{"a pending node that was started", edit(KeyStatus, "phase: Unchanged", "phase: Pending"), KeyStatus,
			"data.status: node cp-2 is Pending but was started; the rollout is AwaitingConfirm, but node cp-2 is not done"},
		{"a node started twice", edit(KeyStatus, "starts: 1", "starts: 2"), KeyStatus,
			"data.status: node cp-0 is Updated with 2 starts: a node starts exactly once"},
		{"order and nodes disagree", edit(KeyStatus, "- cp-1\n", "- cp-9\n"), KeyStatus,
			"data.status: order [cp-0, cp-9, cp-2] does not list the nodes [cp-0, cp-1, cp-2]"},
		{"a short hash", edit(KeyStatus, "hash: sha256:", "hash: sha256:ab"), KeyStatus,
			`data.status: previous.hash "sha256:ab` + Hash(docV2)[7:] + `" is not sha256: and 64 lowercase hex digits`},
		{"untracked writes under a try", edit(KeyStatus, "kind: rollout\n", "kind: rollout\nuntracked:\n  fields: [clusterName]\n"), KeyStatus,
			"data.status: a rollout on trial needs its previous document known exactly, not untracked writes"},
		{"untracked writes in an undo", func(d map[string]string) {
			edit(KeyStatus, "kind: rollout\n", "kind: undo\nuntracked: {}\n")(d)
			edit(KeyStatus, "try:\n  deadline: \"2026-11-30T12:03:01Z\"\n  duration: 20s\n", "")(d)
			edit(KeyStatus, "phase: AwaitingConfirm", "phase: Succeeded\ndocumentRestored: true")(d)
		}, KeyStatus, "data.status: untracked needs a rollout of kind rollout with a previous document"},
		{"target edited", edit(KeyTarget, "clusterName: other", "clusterName: mine"), KeyTarget,
			"data.target: the document's hash is " + Hash([]byte(strings.Replace(string(docV3), "other", "mine", 1))) + ", but the status records " + Hash(docV3)},
		{"previous edited", edit(KeyPrevious, "v1.37.2", "v1.37.3"), KeyPrevious,
			"data.previous: the document's hash is " + Hash([]byte(strings.Replace(string(docV2), "v1.37.2", "v1.37.3", 1))) + ", but the status records " + Hash(docV2)},
		{"target deleted", func(d map[string]string) { delete(d, KeyTarget) }, KeyTarget,
			"data.target: missing, but the status records " + Hash(docV3)},
		{"previous deleted", func(d map[string]string) { delete(d, KeyPrevious) }, KeyPrevious,
			"data.previous: missing, but the status records " + Hash(docV2)},
		{"status deleted, documents kept", func(d map[string]string) { delete(d, KeyStatus) }, KeyStatus,
			"data.status: missing, but data.target is present"},
		{"garbage history", func(d map[string]string) { d[KeyHistory] = "{" }, KeyHistory,
			"data.history: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{"unknown field in the history", edit(KeyHistory, "outcome: Succeeded", "outcome: Succeeded\n  note: x"), KeyHistory,
			`data.history: error unmarshaling JSON: while decoding JSON: json: unknown field "note"`},
		{"oversized", func(d map[string]string) { d["notes"] = strings.Repeat("x", MaxRecordBytes-goldenSize-len("notes")+1) }, "",
			"it holds 921601 bytes, more than the 921600 a record may hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := goldenConfigMap(t)
			tc.edit(cm.Data)
			r, err := FromConfigMap(cm)
			wantRefused(t, err, exitcode.Invalid, prefix+tc.want+suffix)
			var damaged *DamagedError
			if r != nil || !errors.As(err, &damaged) || damaged.Key != tc.key || damaged.ConfigMap != "kube-system/kubeadmcfg-rollout" {
				t.Errorf("record %v, error %#v", r, damaged)
			}
		})
	}
	// Deleting the status and the documents, keeping the history, is a
	// repair: the next rollout numbers on from the history.
	cm := goldenConfigMap(t)
	delete(cm.Data, KeyStatus)
	delete(cm.Data, KeyTarget)
	delete(cm.Data, KeyPrevious)
	if r, err := FromConfigMap(cm); err != nil || r.Status != nil || len(r.History) != 1 {
		t.Errorf("history alone: %v %+v", err, r)
	}
}

// TestSizeBound: documents that would make the record pass its bound are
// refused and nothing is stored; just below, they fit.
func TestSizeBound(t *testing.T) {
	r := awaitingConfirm(t)
	overhead := len(toConfigMap(t, r).Data[KeyStatus]) + len(toConfigMap(t, r).Data[KeyHistory]) +
		len(KeyStatus) + len(KeyHistory) + len(KeyTarget) + len(KeyPrevious)
	half := (MaxRecordBytes - overhead) / 2
	fill := func(n int) ([]byte, []byte) {
		return []byte(strings.Repeat("a", n)), []byte(strings.Repeat("b", MaxRecordBytes-overhead-n))
	}
	// Exactly at the bound: stored, and read back.
	r.Target, r.Previous = fill(half)
	r.Status.Target.Hash, r.Status.Previous.Hash = Hash(r.Target), Hash(r.Previous)
	cm := toConfigMap(t, r)
	if n := dataBytes(cm.Data); n != MaxRecordBytes {
		t.Fatalf("filled to %d bytes, want %d", n, MaxRecordBytes)
	}
	if _, err := FromConfigMap(cm); err != nil {
		t.Fatal(err)
	}
	// One byte more: refused, and the ConfigMap keeps what it held.
	before := cm.DeepCopy()
	r.Target = append(r.Target, 'a')
	r.Status.Target.Hash = Hash(r.Target)
	err := r.ToConfigMap(cm)
	wantRefused(t, err, exitcode.Invalid, fmt.Sprintf("the documents are too large for the rollout record: it would hold 921601 bytes, more than 921600 "+
		"(target %d bytes, previous %d); nothing was written", half+1, MaxRecordBytes-overhead-half))
	if d := cmp.Diff(before, cm); d != "" {
		t.Errorf("a refused write changed the ConfigMap (-want +got):\n%s", d)
	}
}

// TestEncodeRefusesABrokenRecord: a record the transitions could not have
// made is never written.
func TestEncodeRefusesABrokenRecord(t *testing.T) {
	r := awaitingConfirm(t)
	r.Target = docV1
	wantRefused(t, r.ToConfigMap(&corev1.ConfigMap{}), exitcode.Invalid,
		"refusing to write a rollout record that breaks its rules: the target document's hash is "+Hash(docV1)+", but the status records "+Hash(docV3))
	r = awaitingConfirm(t)
	r.Status.Nodes[2].Phase = NodeInProgress
	wantRefused(t, r.ToConfigMap(&corev1.ConfigMap{}), exitcode.Invalid,
		"refusing to write a rollout record that breaks its rules: the rollout is AwaitingConfirm, but node cp-2 is not done")
}

// TestApply: a change is stored when it changed something, and only then;
// other keys of the ConfigMap are kept.
func TestApply(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultConfigMap},
		Data: map[string]string{"README": "managed by kubectl-kubeadmcfg"}}
	r, changed, err := Apply(cm, func(r *Record) (bool, error) { return true, r.Start(by("alice", 0), spec()) })
	if err != nil || !changed || r.Status.ID != 1 || cm.Data[KeyTarget] != string(docV2) || cm.Data["README"] == "" {
		t.Fatalf("start: %v %v %v", err, changed, cm.Data)
	}
	before := cm.DeepCopy()
	for _, change := range []func(*Record) (bool, error){
		func(r *Record) (bool, error) { return r.Resume(by("bob", 1)) },                  // nothing to do
		func(r *Record) (bool, error) { return true, r.Start(by("bob", 1), spec()) },     // refused
		func(r *Record) (bool, error) { r.Status.Phase = "Broken"; return true, nil },    // breaks a rule
		func(r *Record) (bool, error) { r.Target = []byte("changed"); return true, nil }, // hash mismatch
	} {
		if _, changed, _ := Apply(cm, change); changed {
			t.Error("changed")
		}
		if d := cmp.Diff(before, cm); d != "" {
			t.Errorf("the ConfigMap changed (-want +got):\n%s", d)
		}
	}
	cm.Data[KeyStatus] = "{"
	if _, changed, err := Apply(cm, func(r *Record) (bool, error) { return r.Pause(by("bob", 2)) }); changed || exitcode.FromError(err) != exitcode.Invalid {
		t.Errorf("a damaged record was changed: %v %v", changed, err)
	}
}
