package controlplane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// standIn writes a kubeadm stand-in (sh) that answers `version` with
// version and runs render for a phase, and returns its path.
func standIn(t *testing.T, version, render string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the kubeadm stand-in is a shell script")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeadm")
	script := "#!/bin/sh\ndir=" + dir + "\ncase \"$1\" in\nversion) " + version + " ;;\ninit) " + render + " ;;\nesac\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte("kind: Pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The render runs kubeadm's phase with KUBEADM_INIT_DRYRUN_DIR set and
// reads the manifest it wrote there.
func TestRenderReadsWhatKubeadmWrote(t *testing.T) {
	bin := standIn(t, "echo v1.37.2", `echo "[dryrun] Would write file"; cp "$dir/kube-apiserver.yaml" "$KUBEADM_INIT_DRYRUN_DIR/"`)
	got, err := Renderer{Kubeadm: bin}.Render(context.Background(), []byte("kind: ClusterConfiguration\n"), []Component{APIServer})
	if err != nil {
		t.Fatal(err)
	}
	if string(got[APIServer]) != "kind: Pod\n" {
		t.Errorf("rendered %q", got[APIServer])
	}
}

// kubeadm refusing the document is a KubeadmError that says how kubeadm
// ended and quotes kubeadm's own error lines, from its whole output.
func TestRenderKubeadmRefuses(t *testing.T) {
	bin := standIn(t, "echo v1.37.2", `echo "[control-plane] Creating static Pod manifest for \"kube-apiserver\""
echo "W1202 05:09:16.559520     182 strict.go:1] a warning" >&2
echo "error execution phase control-plane/apiserver: bad value" >&2
i=0; while [ $i -lt 10 ]; do echo "[dryrun] line $i"; i=$((i+1)); done
echo "To see the stack trace of this error execute with --v=5 or higher" >&2
exit 1`)
	_, err := Renderer{Kubeadm: bin}.Render(context.Background(), []byte("kind: ClusterConfiguration\n"), []Component{APIServer})
	var kerr *KubeadmError
	var run *proc.RunError
	if !errors.As(err, &kerr) || !errors.As(err, &run) || run.ExitCode != 1 {
		t.Fatalf("want a KubeadmError of a kubeadm that exited 1: %#v", err)
	}
	if want := "kubeadm could not render the kube-apiserver manifest: exited 1: error execution phase control-plane/apiserver: bad value"; err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
}

// A kubeadm whose release cannot be told, or is too old, is refused before
// it renders.
func TestRenderRefusesAKubeadmItCannotTrust(t *testing.T) {
	for _, tc := range []struct{ name, version, want string }{
		{"version fails", "echo boom >&2; exit 2", "cannot tell kubeadm's release: BIN version exited 2: boom"},
		{"too old", "echo v1.35.9", `BIN reports version "v1.35.9": kubeadm 1.35 is not known to render into KUBEADM_INIT_DRYRUN_DIR`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := standIn(t, tc.version, "echo rendered; exit 0")
			_, err := Renderer{Kubeadm: bin}.Render(context.Background(), nil, []Component{APIServer})
			if err == nil || !strings.HasPrefix(strings.ReplaceAll(err.Error(), bin, "BIN"), tc.want) {
				t.Errorf("got %v, want %s...", err, tc.want)
			}
		})
	}
	if _, err := (Renderer{Kubeadm: "kubeadmcfg-no-such-kubeadm"}).Version(context.Background()); err == nil ||
		!strings.HasPrefix(err.Error(), "cannot run kubeadm: ") || !errors.Is(err, proc.ErrNotFound) {
		t.Errorf("a kubeadm not found: %v", err)
	}
}
