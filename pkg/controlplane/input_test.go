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
// (internal/input.MaxBytes) and refused unexpanded when they hold YAML
// anchors or aliases, which kubeadm never writes.

func schedulerManifest(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/kube-scheduler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseManifestRefusesAliases(t *testing.T) {
	data := schedulerManifest(t)
	lines := strings.Count(string(data), "\n")
	bomb := []byte(string(data) + "x-a: &a \"" + strings.Repeat("x", 1000) + "\"\n" +
		"x-b: &b [" + strings.TrimSuffix(strings.Repeat("*a,", 100), ",") + "]\n" +
		"x-c: [" + strings.TrimSuffix(strings.Repeat("*b,", 100), ",") + "]\n")
	_, err := ParseManifest(bomb)
	want := "the manifest cannot be used: YAML anchor &a on line " + strconv.Itoa(lines+1) + ": anchors and aliases are not accepted"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
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
