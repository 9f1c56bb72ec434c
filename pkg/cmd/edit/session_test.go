package edit

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// A second apiServer block added at the bottom, instead of an edit of the
// first, is a problem that reopens the editor (or exits 3): read leniently,
// it would replace the first block, and the three-way merge would delete
// the live apiServer.extraArgs without a word.
func TestEditCheckRefusesADuplicateKey(t *testing.T) {
	stored, err := os.ReadFile("../../../testdata/documents/v1beta4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base, err := clusterconfig.Parse(stored)
	if err != nil {
		t.Fatal(err)
	}
	s := &editSession{o: NewOptions(nil, streams), base: base}
	edited := []byte(string(stored) + "apiServer:\n  certSANs:\n  - b.example.com\n")
	_, edit, problems := s.check(edited)
	want := []string{`the ClusterConfiguration gives a key twice, which kubeadm refuses (line 32: key "apiServer" already set in map); keep one`}
	if diff := cmp.Diff(want, problems); diff != "" || edit != nil {
		t.Errorf("problems (-want +got):\n%s\nedit: %v", diff, edit)
	}
}
