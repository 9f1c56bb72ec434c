package edit

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
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

// A stored document that already gives a key twice (written by another
// tool) and is saved unchanged is cancelled (exit 0) as any unchanged save
// is, before the strict parse that would refuse it; with a change, the
// duplicate is still refused (exit 3 off a terminal).
func TestEditUnchangedSaveOfADuplicateKeyCancels(t *testing.T) {
	doc, err := os.ReadFile("../../../testdata/documents/v1beta4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stored := string(doc) + "apiServer:\n  certSANs:\n  - b.example.com\n"
	for _, tc := range []struct {
		name   string
		editor []string
		code   exitcode.Code
		out    string
	}{
		{"saved unchanged", []string{"true"}, exitcode.OK, "edit cancelled, no changes made\n"},
		{"changed", []string{"sed", "-i", "s/^clusterName: kubernetes$/clusterName: changed/"}, exitcode.Invalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TMPDIR", t.TempDir()) // where the text refused is kept
			cs := fake.NewClientset(&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "7"},
				Data:       map[string]string{"ClusterConfiguration": stored},
			})
			writes := 0
			cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				writes++
				return false, nil, nil
			})
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			o := NewOptions(cmdutil.NewClusterFlags(), streams)
			o.Editor = cmdutil.Editor{Args: tc.editor}
			o.engine = engine.New(cs, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
				engine.Options{Timeout: 5 * time.Second})
			err := o.Run(context.Background())
			if code := exitcode.FromError(err); code != tc.code {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.code)
			}
			if tc.code == exitcode.Invalid && !strings.Contains(err.Error(), `key "apiServer" already set`) {
				t.Fatalf("err %v, want the key given twice", err)
			}
			if out.String() != tc.out || writes != 0 {
				t.Fatalf("printed %q, %d writes; want %q and none", out, writes, tc.out)
			}
		})
	}
}

// A problem's line number is the line of the file the editor showed, header
// comments and all, not of the text without them.
func TestEditProblemsNameTheLineOfTheEditedFile(t *testing.T) {
	doc, err := os.ReadFile("../../../testdata/documents/v1beta4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system", ResourceVersion: "7"},
		Data:       map[string]string{"ClusterConfiguration": string(doc)},
	})
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	o := NewOptions(cmdutil.NewClusterFlags(), streams)
	// The editor gives clusterName a second time and notes the line it is
	// on, as the user sees it.
	lineFile := t.TempDir() + "/line"
	o.Editor = cmdutil.Editor{Args: []string{"sh", "-c",
		`echo 'clusterName: other' >> "$1" && grep -n '^clusterName:' "$1" | tail -n 1 | cut -d: -f1 > "$0"`, lineFile}}
	o.engine = engine.New(cs, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
		engine.Options{Timeout: 5 * time.Second})
	err = o.Run(context.Background())
	line, readErr := os.ReadFile(lineFile)
	if readErr != nil {
		t.Fatal(readErr)
	}
	want := "line " + strings.TrimSpace(string(line)) + `: key "clusterName" already set`
	if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want exit 3 naming %q", err, want)
	}
}
