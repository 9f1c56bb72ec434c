package controlplane

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Manifests, running or rendered, are read up to 2 MiB
// (internal/input.MaxBytes). kubeadm never writes YAML anchors or aliases,
// but a manifest edited by hand to hold some is read as the kubelet reads
// it, and refused unexpanded only when they expand it past the bound of
// internal/input.

func schedulerManifest(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/kube-scheduler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseManifestBoundsAliases(t *testing.T) {
	data := schedulerManifest(t)
	want, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	// The startup probe's check, by hand, as an alias of the liveness
	// probe's.
	livez := "      httpGet:\n        host: 127.0.0.1\n        path: /livez\n        port: probe-port\n        scheme: HTTPS\n"
	if strings.Count(string(data), livez) != 2 {
		t.Fatalf("want the liveness and startup probes to check %q", livez)
	}
	edited := strings.Replace(string(data), livez, strings.Replace(livez, "httpGet:", "httpGet: &livez", 1), 1)
	edited = strings.Replace(edited, livez, "      httpGet: *livez\n", 1)
	got, err := ParseManifest([]byte(edited))
	if err != nil {
		t.Fatalf("with an alias: %v", err)
	}
	if !got.SameAs(want) {
		t.Errorf("with an alias: got %+v, want the Pod as written in full", got.Pod.Spec.Containers[0].StartupProbe)
	}

	lines := strings.Count(string(data), "\n")
	bomb := []byte(string(data) + "x-a: &a \"" + strings.Repeat("x", 1000) + "\"\n" +
		"x-b: &b [" + strings.TrimSuffix(strings.Repeat("*a,", 100), ",") + "]\n" +
		"x-c: [" + strings.TrimSuffix(strings.Repeat("*b,", 100), ",") + "]\n")
	_, err = ParseManifest(bomb)
	wantErr := "the manifest cannot be used: YAML alias *b on line " + strconv.Itoa(lines+3) + " expands the document to more than "
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("got %v, want %q", err, wantErr)
	}
}

func TestManifestsAreReadUpTo2MiB(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, Scheduler.File())
	write := func(n int) {
		data := schedulerManifest(t)
		data = append(data, "#"+strings.Repeat("x", n-len(data)-2)+"\n"...)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(2 << 20)
	if _, err := ReadManifest(path); err != nil {
		t.Fatalf("2 MiB: %v", err)
	}
	write(2<<20 + 1)
	_, err := ReadManifest(path)
	if want := "read " + path + ": larger than 2 MiB"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("2 MiB and 1 byte: got %v, want %q", err, want)
	}
	// reconfigure's plan refuses the running manifest as invalid (exit 3).
	_, err = NewPlan(dir, map[Component][]byte{Scheduler: schedulerManifest(t)}, []Component{Scheduler})
	if want := "the running kube-scheduler manifest: read " + path + ": larger than 2 MiB"; err == nil || !strings.HasPrefix(err.Error(), want) || exitcode.FromError(err) != exitcode.Invalid {
		t.Fatalf("NewPlan: got %v (exit %d), want %q (exit 3)", err, exitcode.FromError(err), want)
	}
}
