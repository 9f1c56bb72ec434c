package uploadconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// replace returns doc with each old, new pair replaced once, and fails the
// test when one is not there.
func replace(t *testing.T, doc string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(doc, pairs[i]) {
			t.Fatalf("%q is not in the document:\n%s", pairs[i], doc)
		}
		doc = strings.Replace(doc, pairs[i], pairs[i+1], 1)
	}
	return doc
}

// The change kubeadm makes, applied to what kubeadm-config holds at the
// write: the document kubeadm read, the one it would write (both from
// kubeadm 1.37.2's dry runs in testdata), and the one another writer left
// -> what is written.
//
// Who wins when kubeadm and another writer changed the same field: neither,
// here. The edit is a conflict and writes nothing; UpgradeDocument then asks
// kubeadm again, which reads the other writer's document and applies its
// own rule to it (TestUpgradeDocument).
func TestEdit(t *testing.T) {
	v137 := func(doc string) string {
		return replace(t, doc, "kubernetesVersion: v1.36.3", "kubernetesVersion: v1.37.2")
	}
	withSANs := replace(t, localclusterDoc, "apiServer:\n", "apiServer:\n  certSANs:\n  - lb.example.com\n")
	for _, tc := range []struct {
		name                string
		read, written, live string
		want                string   // the document written
		conflicts           []string // instead: the conflicting fields
	}{{
		name: "nobody wrote meanwhile: kubeadm's document, byte for byte",
		read: localclusterDoc, written: v137(localclusterDoc), live: localclusterDoc,
		want: v137(localclusterDoc),
	}, {
		name: "an entry appended to apiServer.certSANs meanwhile is kept",
		read: withSANs, written: v137(withSANs),
		live: replace(t, withSANs, "  - lb.example.com\n", "  - lb.example.com\n  - appended.example.com\n"),
		want: v137(replace(t, withSANs, "  - lb.example.com\n", "  - lb.example.com\n  - appended.example.com\n")),
	}, {
		name: "apiServer.certSANs created meanwhile is kept",
		read: localclusterDoc, written: v137(localclusterDoc), live: withSANs,
		want: v137(withSANs),
	}, {
		name: "kubeadm's defaults are added, around another writer's change",
		read: minimalDoc, written: minimalWritten,
		live: minimalDoc + "controllerManager:\n  extraArgs:\n  - name: v\n    value: \"2\"\n",
		want: replace(t, minimalWritten, "controllerManager: {}\n", "controllerManager:\n  extraArgs:\n  - name: v\n    value: \"2\"\n"),
	}, {
		name: "the fields kubeadm drops are dropped, another writer's change is kept",
		read: unknownDoc, written: minimalWritten,
		live: replace(t, unknownDoc, "  podSubnet: 10.244.0.0/16\n", "  podSubnet: 10.245.0.0/16\n"),
		want: replace(t, minimalWritten, "  podSubnet: 10.244.0.0/16\n", "  podSubnet: 10.245.0.0/16\n"),
	}, {
		name: "kubeadm's form of a value (8760h0m0s) and another writer's new value of it conflict",
		read: handwrittenDoc, written: readWritten(t, "dry-run-handwritten-normalized.txt"),
		live:      replace(t, handwrittenDoc, "certificateValidityPeriod: 8760h", "certificateValidityPeriod: 9000h"),
		conflicts: []string{`certificateValidityPeriod: was "8760h", edited "8760h0m0s", live "9000h"`},
	}, {
		name: "kubernetesVersion changed meanwhile to another version conflicts",
		read: localclusterDoc, written: v137(localclusterDoc),
		live:      replace(t, localclusterDoc, "kubernetesVersion: v1.36.3", "kubernetesVersion: v1.37.1"),
		conflicts: []string{`kubernetesVersion: was "v1.36.3", edited "v1.37.2", live "v1.37.1"`},
	}, {
		name: "kubernetesVersion set meanwhile to the same version is no conflict",
		read: localclusterDoc, written: v137(localclusterDoc), live: v137(withSANs),
		want: v137(withSANs),
	}, {
		// kubeadm 1.37 changes no list; were it to, a list is one value, as
		// in any three-way merge of the plugin.
		name: "a list kubeadm changes and another writer appended to conflicts",
		read: withSANs, written: v137(replace(t, withSANs, "  - lb.example.com\n", "  - LB.example.com\n")),
		live:      replace(t, withSANs, "  - lb.example.com\n", "  - lb.example.com\n  - appended.example.com\n"),
		conflicts: []string{`apiServer.certSANs: was ["lb.example.com"], edited ["LB.example.com"], live ["lb.example.com","appended.example.com"]`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			edit, err := (&Upload{Read: []byte(tc.read), Written: []byte(tc.written)}).Edit()
			if err != nil {
				t.Fatal(err)
			}
			live, err := clusterconfig.Parse([]byte(tc.live))
			if err != nil {
				t.Fatal(err)
			}
			err = edit.Apply(live)
			if tc.conflicts != nil {
				var conflict *clusterconfig.MergeConflictError
				if !errors.As(err, &conflict) || exitcode.FromError(err) != exitcode.Conflict {
					t.Fatalf("want a merge conflict (exit 4), got %v", err)
				}
				var got []string
				for _, c := range conflict.Conflicts {
					got = append(got, c.String())
				}
				if diff := cmp.Diff(tc.conflicts, got); diff != "" {
					t.Fatalf("conflicts (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(live.MustMarshal())); diff != "" {
				t.Fatalf("written (-want +got):\n%s", diff)
			}
		})
	}
}

// readWritten is the document kubeadm would write, from a dry run's output
// in testdata.
func readWritten(t *testing.T, file string) string {
	t.Helper()
	up, err := parseDryRun(readTestdata(t, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(up.Written)
}

// A kubeadm that would convert the document to another apiVersion is not
// carried as an edit.
func TestEditRefusesAConversion(t *testing.T) {
	converted := replace(t, v137doc(t), "apiVersion: kubeadm.k8s.io/v1beta4", "apiVersion: kubeadm.k8s.io/v1")
	_, err := (&Upload{Read: []byte(localclusterDoc), Written: []byte(converted)}).Edit()
	want := "kubeadm would write kubeadm-config as kubeadm.k8s.io/v1, converted from kubeadm.k8s.io/v1beta4: a conversion is not an edit that can be merged with other writers' changes"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func v137doc(t *testing.T) string {
	t.Helper()
	return replace(t, localclusterDoc, "kubernetesVersion: v1.36.3", "kubernetesVersion: v1.37.2")
}
