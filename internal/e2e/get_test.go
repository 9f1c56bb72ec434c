package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

func TestPluginDiscoveredByKubectl(t *testing.T) {
	r := run(t, "kubectl", "plugin", "list")
	if !strings.Contains(r.stdout, s.binDir+"/kubectl-kubeadmcfg") {
		t.Fatalf("kubectl plugin list does not show the plugin: %s", r)
	}
}

func TestGetEqualsStoredDocument(t *testing.T) {
	e := newEnv(t)
	got := e.plugin("get")
	wantExit(t, got, 0)
	want := e.kubectl("get", "cm", "kubeadm-config", "-o", "jsonpath={.data.ClusterConfiguration}")
	wantExit(t, want, 0)
	if diff := cmp.Diff(want.stdout, got.stdout); diff != "" {
		t.Fatalf("get differs from the stored document (-want +got):\n%s", diff)
	}
	if !strings.Contains(got.stdout, "kind: ClusterConfiguration") {
		t.Fatalf("not a ClusterConfiguration: %s", got.stdout)
	}
}

func TestGetOutputFormats(t *testing.T) {
	e := newEnv(t)
	r := e.plugin("get", "-o", "json")
	wantExit(t, r, 0)
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, r.stdout)
	}
	if doc["kind"] != "ClusterConfiguration" {
		t.Fatalf("kind = %v", doc["kind"])
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "jsonpath={.networking.podSubnet}"}, "10.244.0.0/16"},
		{[]string{"-o", "go-template={{.kubernetesVersion}}"}, "v1.37.2"},
		{[]string{"-o", "yaml"}, "kind: ClusterConfiguration\n"},
	} {
		r := e.plugin(append([]string{"get"}, tc.args...)...)
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, tc.want) {
			t.Errorf("get %v: want %q in %s", tc.args, tc.want, r)
		}
	}
	wantExit(t, e.plugin("get", "-o", "bogus"), 2)
}

func TestGetErrors(t *testing.T) {
	e := newEnv(t)
	t.Run("missing configmap exits 5", func(t *testing.T) {
		r := e.plugin("get", "--configmap", "does-not-exist")
		wantExit(t, r, 5)
		if !strings.Contains(r.stderr, "does-not-exist") {
			t.Fatalf("error does not name the ConfigMap: %s", r)
		}
	})
	t.Run("missing key exits 5", func(t *testing.T) {
		wantExit(t, e.plugin("get", "--key", "Nope"), 5)
	})
	t.Run("unprivileged user exits 6", func(t *testing.T) {
		r := e.kubectlAs(testcluster.UnprivilegedContext, "kubeadmcfg", "get")
		wantExit(t, r, 6)
		if !strings.Contains(r.stderr, "forbidden") {
			t.Fatalf("error does not say forbidden: %s", r)
		}
	})
	t.Run("bad flag exits 2", func(t *testing.T) {
		wantExit(t, e.plugin("get", "--no-such-flag"), 2)
	})
	t.Run("unreachable server exits 1 within the request timeout", func(t *testing.T) {
		start := time.Now()
		r := run(t, "kubectl", "kubeadmcfg", "get", "--server", "https://127.0.0.1:1",
			"--insecure-skip-tls-verify", "--token", "x", "--request-timeout", "5s")
		wantExit(t, r, 1)
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("took %s, want within the 5s request timeout", took)
		}
	})
}
