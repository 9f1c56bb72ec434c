package clusterconfig

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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
			got, _ := json.MarshalIndent(r, "", "  ")
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
// version up on the network when the kubernetesVersion of an Init or
// ClusterConfiguration is empty or a label.
func TestCorpusNeverNeedsTheNetwork(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		text := string(data)
		readsVersion := strings.Contains(text, "kind: ClusterConfiguration") || strings.Contains(text, "kind: InitConfiguration")
		if readsVersion && !strings.Contains(text, "kubernetesVersion: ") {
			t.Errorf("%s: every corpus document kubeadm resolves a version for sets kubernetesVersion explicitly", filepath.Base(f))
		}
	}
}

func TestValidateFile(t *testing.T) {
	const (
		cluster = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n"
		init    = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n"
	)
	for _, tc := range []struct {
		name, file string
		wantErr    string // the first error; "" for valid
		release    string
	}{
		{"init only", init, "", "1.37"},
		{"empty file", "", "", "1.37"},
		{"init and cluster", init + "---\n" + cluster, "", "1.37"},
		{"two separators make no empty document", cluster + "---\n---\n" + init, "", "1.37"},
		{"a trailing separator makes no document", cluster + "---\n", "", "1.37"},
		{"unknown kind", "apiVersion: example.com/v1\nkind: Foo\n---\n" + cluster,
			"document 1 (Foo, line 1): unknown configuration API example.com/v1, kind Foo", "1.37"},
		{"empty document at the end", cluster + "---\n\n",
			`document 2 (line 5) is empty (nothing but comments or blank lines): kubeadm refuses the file, as every document needs apiVersion and kind; remove the empty document or its "---"`, "1.37"},
		{"comment-only document first", "# header\n---\n" + cluster,
			`document 1 (line 1) is empty (nothing but comments or blank lines): kubeadm refuses the file, as every document needs apiVersion and kind; remove the empty document or its "---"`, "1.37"},
		{"kind twice", cluster + "---\n" + strings.Replace(cluster, "v1beta4", "v1", 1),
			"document 2 (line 5): kind ClusterConfiguration is given twice (first in document 1)", "1.37"},
		{"bad separator", cluster + "--- x\n" + init, "line 4: invalid YAML document separator: x", ""},
		{"other documents are checked", cluster + "---\n" + init + "localAPIEndpoint: {bindPort: 70000}\n",
			"document 2 (InitConfiguration, line 5): localAPIEndpoint.bindPort: Invalid value: 70000: port number is not valid", "1.37"},
		{"unknown field in init", cluster + "---\n" + init + "bogus: 1\n",
			`document 2 (InitConfiguration, line 5): unknown field "bogus"`, "1.37"},
		{"v1beta3 selects 1.36, which does not read v1", strings.Replace(cluster, "v1beta4", "v1beta3", 1) + "---\n" + strings.Replace(init, "v1beta4", "v1", 1),
			"document 2 (InitConfiguration, line 5): kubeadm 1.36 does not read kubeadm.k8s.io/v1 yet (newer releases do)", "1.36"},
		{"v1beta3 reset is unknown", "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ResetConfiguration\n",
			"document 1 (ResetConfiguration, line 1): unknown configuration API kubeadm.k8s.io/v1beta3, kind ResetConfiguration", "1.36"},
		{"component config without init or cluster only warns", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nbogus: 1\n", "", "1.37"},
		{"component config with cluster is decoded", cluster + "---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nbogus: 1\n",
			`document 2 (KubeletConfiguration, line 5): unknown field "bogus"`, "1.37"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidateFile([]byte(tc.file), ValidateOptions{})
			if tc.wantErr == "" && !r.Valid() {
				t.Fatalf("want valid, got %q", r.Errors)
			}
			if tc.wantErr != "" && (len(r.Errors) == 0 || r.Errors[0] != tc.wantErr) {
				t.Fatalf("errors = %q\nwant first %q", r.Errors, tc.wantErr)
			}
			if r.KubeadmRelease != tc.release {
				t.Fatalf("release %q, want %q", r.KubeadmRelease, tc.release)
			}
		})
	}
}

// TestSplitFileMatchesKubeadm checks that the plugin cuts a file where
// kubeadm's reader (apimachinery's YAMLReader) does.
func TestSplitFileMatchesKubeadm(t *testing.T) {
	for _, in := range splitInputs {
		want := yamlReaderChunks(in)
		chunks, _, err := splitChunks([]byte(in))
		if (err != nil) != (want == nil) {
			t.Fatalf("%q: err %v, YAMLReader %q", in, err, want)
		}
		if err == nil && !slices.EqualFunc(chunks, want, bytes.Equal) {
			t.Errorf("%q: chunks %q, YAMLReader %q", in, chunks, want)
		}
	}
}

var splitInputs = []string{
	"", "\n", "# only\n", "---\na: 1\n", "a: 1\n---\n", "a: 1\n---\n---\nb: 2\n", "a: 1\n---\n# c\n---\nb: 2\n",
	"a: 1\n---\n\n\n", "a: 1\n--- \nb: 2\n", "a: 1\n---\n   \n---\nb: 1\n", "a: 1\n...\n---\nb: 1\n", "a: 1\r\n---\r\nb: 2",
	"a: 1\n--- # c\nb: 2", "a: 1\n---x\n", "---\n---\n", "a: |\n  ---\n",
}

// yamlReaderChunks is what kubeadm's reader makes of in; nil on an error.
func yamlReaderChunks(in string) [][]byte {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(in)))
	var out [][]byte
	for {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			if out == nil {
				return [][]byte{}
			}
			return out
		}
		if err != nil {
			return nil
		}
		out = append(out, chunk)
	}
}

func TestValidateKubeadmVersionOption(t *testing.T) {
	doc := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.34.3\n")
	if r := Validate(doc, ValidateOptions{}); r.Valid() {
		t.Fatal("v1.34.3 must be refused by the kubeadm 1.37 rules")
	}
	if r := Validate(doc, ValidateOptions{KubeadmVersion: "v1.35.0"}); !r.Valid() {
		t.Fatalf("v1.34.3 is fine for kubeadm 1.35: %q", r.Errors)
	}
	if r := Validate(doc, ValidateOptions{KubeadmVersion: "v1.33.0"}); r.Valid() {
		t.Fatal("a kubeadm release the plugin does not know must be refused")
	}
	v1beta3 := []byte("apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nkubernetesVersion: v1.34.5\n")
	if r := Validate(v1beta3, ValidateOptions{}); r.Valid() || !strings.Contains(r.Errors[0], ">= 1.35.0") {
		t.Fatalf("v1beta3 gets the kubeadm 1.36 minimum: %q", r.Errors)
	}
	if r := Validate(v1beta3, ValidateOptions{KubeadmVersion: "v1.37.2"}); r.Valid() || !strings.Contains(r.Errors[0], "use kubeadm v1.36") {
		t.Fatalf("kubeadm 1.37 does not read v1beta3: %q", r.Errors)
	}
}

func TestFeatureGatesPerRelease(t *testing.T) {
	for _, tc := range []struct {
		release, gate string
		valid         bool
		want          string
	}{
		{"v1.35.0", "ControlPlaneKubeletLocalMode", true, ""},
		{"v1.36.0", "ControlPlaneKubeletLocalMode", false, "kubeadm 1.36 removed it"},
		{"v1.36.0", "PublicKeysECDSA", true, ""},
		{"v1.37.0", "PublicKeysECDSA", false, "kubeadm 1.37 removed it"},
		{"v1.37.0", "NodeLocalCRISocket", false, "kubeadm 1.37 removed it"},
		{"v1.37.0", "RootlessControlPlane", true, ""},
		{"v1.36.0", "NotARealGate", false, "not a valid feature name in kubeadm 1.36"},
		{"v1.36.0", "", false, "not a valid feature name"},
	} {
		doc := fmt.Sprintf("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.0\nfeatureGates: {%q: true}\n", tc.gate)
		r := Validate([]byte(doc), ValidateOptions{KubeadmVersion: tc.release})
		if r.Valid() != tc.valid || (tc.want != "" && !strings.Contains(strings.Join(r.Errors, ";"), tc.want)) {
			t.Errorf("%s %q: valid=%v errors %q, want valid=%v and %q", tc.release, tc.gate, r.Valid(), r.Errors, tc.valid, tc.want)
		}
	}
}

func TestParsePort(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"6443", true}, {"1", true}, {"65535", true}, {"06443", true},
		{"0", false}, {"65536", false}, {"+6443", false}, {"-1", false}, {" 6443", false},
		{"0x1a0b", false}, {"6_443", false}, {"", false}, {"６４４３", false},
	} {
		if _, err := parsePort(tc.in); (err == nil) != tc.ok {
			t.Errorf("parsePort(%q): err %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
