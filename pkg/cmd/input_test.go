package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// validate -f /dev/zero ends at the limit with one clear error.
func TestValidateDevZero(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- Run(genericiooptions.NewTestIOStreamsDiscard(), []string{"validate", "-f", "/dev/zero"})
	}()
	select {
	case err := <-done:
		want := "the config file /dev/zero is larger than 2 MiB, the limit for any input (twice what a ConfigMap holds)"
		if err == nil || err.Error() != want || exitcode.FromError(err) != exitcode.Invalid {
			t.Fatalf("got %v (exit %d), want %q (exit 3)", err, exitcode.FromError(err), want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("validate -f /dev/zero is still reading")
	}
}

// validate -f reads YAML anchors and aliases as kubeadm does, and refuses
// a file whose aliases expand it past the bound with exit 3, one line
// naming the alias, and nothing expanded.
func TestValidateFileWithAliases(t *testing.T) {
	bomb := filepath.Join(t.TempDir(), "bomb.yaml")
	text := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\nbomb:\n" +
		"  a: &a \"" + strings.Repeat("x", 10000) + "\"\n" +
		"  b: &b [" + strings.TrimSuffix(strings.Repeat("*a, ", 100), ", ") + "]\n" +
		"  c: [" + strings.TrimSuffix(strings.Repeat("*b, ", 100), ", ") + "]\n"
	if err := os.WriteFile(bomb, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		out, err   string
		code       exitcode.Code
	}{
		{"anchors and aliases", "../../testdata/corpus/valid-yaml-anchors.yaml",
			"../../testdata/corpus/valid-yaml-anchors.yaml: the file (ClusterConfiguration, InitConfiguration) is valid for kubeadm 1.37\n", "", exitcode.OK},
		{"aliases past the bound", bomb,
			"document 1 (line 1): YAML alias *b on line 7 expands the document to more than 1088924 bytes of values, the limit for one that holds 10087 (4 times as many, plus 1 MiB); use fewer aliases, or write the values out in full\n",
			bomb + ": the file (no kind) is invalid for kubeadm 1.37 (1 problems)", exitcode.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			err := Run(streams, []string{"validate", "-f", tc.file})
			if diff := cmp.Diff(tc.out, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if got := fmt.Sprint(err); exitcode.FromError(err) != tc.code || (err != nil) != (tc.err != "") || err != nil && got != tc.err {
				t.Errorf("got %v (exit %d), want %q (exit %d)", err, exitcode.FromError(err), tc.err, tc.code)
			}
		})
	}
}
