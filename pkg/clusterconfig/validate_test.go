package clusterconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusDir holds ClusterConfiguration files named by their expected verdict
// (valid-*.yaml, invalid-*.yaml). The e2e suite checks that the real kubeadm
// gives the same verdict on every v1beta4 and v1 file.
const corpusDir = "../../testdata/corpus"

// TestCorpusVerdicts checks every corpus file's verdict, and compares the
// problems reported with the golden file beside it. Set UPDATE_GOLDEN=1 to
// rewrite the golden files.
func TestCorpusVerdicts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	if err != nil || len(files) < 40 {
		t.Fatalf("want at least 40 corpus files, found %d (%v)", len(files), err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := ValidateFile(data, ValidateOptions{})
			wantValid := strings.HasPrefix(name, "valid-")
			if r.Valid() != wantValid {
				t.Fatalf("valid = %v, want %v; errors: %q", r.Valid(), wantValid, r.Errors)
			}
			got, _ := json.MarshalIndent(r.Report, "", "  ")
			golden := strings.TrimSuffix(f, ".yaml") + ".golden.json"
			if os.Getenv("UPDATE_GOLDEN") != "" {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
			}
			if diff := cmp.Diff(strings.TrimSpace(string(want)), strings.TrimSpace(string(got))); diff != "" {
				t.Errorf("report differs from %s (-want +got):\n%s", filepath.Base(golden), diff)
			}
		})
	}
}

// TestCorpusNeverNeedsTheNetwork guards the e2e oracle: kubeadm looks a
// version up on the network when kubernetesVersion is empty or a label.
func TestCorpusNeverNeedsTheNetwork(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if !strings.Contains(string(data), "kubernetesVersion") {
			t.Errorf("%s: every corpus document sets kubernetesVersion explicitly", filepath.Base(f))
		}
	}
}

func TestValidateFile(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		wantErr    string
		notChecked int
	}{
		{"no cluster configuration", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n", "the file has no ClusterConfiguration document", 1},
		{"empty", "", "the file has no ClusterConfiguration document", 0},
		{"init and cluster", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n", "", 1},
		{"unknown kind", "apiVersion: example.com/v1\nkind: Foo\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n", "document 1: unknown configuration API example.com/v1, kind Foo", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidateFile([]byte(tc.file), ValidateOptions{})
			if tc.wantErr == "" && !r.Valid() {
				t.Fatalf("want valid, got %q", r.Errors)
			}
			if tc.wantErr != "" && (len(r.Errors) == 0 || r.Errors[0] != tc.wantErr) {
				t.Fatalf("errors = %q, want first %q", r.Errors, tc.wantErr)
			}
			if len(r.NotChecked) != tc.notChecked {
				t.Fatalf("notChecked = %d, want %d", len(r.NotChecked), tc.notChecked)
			}
		})
	}
}

func TestValidateKubeadmVersionOption(t *testing.T) {
	doc := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.32.3\n")
	if r := Validate(doc, ValidateOptions{}); r.Valid() {
		t.Fatal("v1.32.3 must be refused by the kubeadm 1.37 rules")
	}
	if r := Validate(doc, ValidateOptions{KubeadmVersion: "v1.33.0"}); !r.Valid() {
		t.Fatalf("v1.32.3 is fine for kubeadm 1.33: %q", r.Errors)
	}
}
