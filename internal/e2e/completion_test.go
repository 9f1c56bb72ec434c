package e2e

import (
	"strings"
	"testing"
)

// complete asks kubectl to complete `kubectl kubeadmcfg ARGS`, which runs
// the kubectl_complete-kubeadmcfg helper, and returns the candidates.
func (e *env) complete(args ...string) []string {
	e.t.Helper()
	// The namespace goes right after the verb, so that the word being
	// completed stays last; the kubeconfig comes from the environment.
	full := []string{"__complete", "kubeadmcfg", args[0]}
	if len(args) > 1 {
		full = append(full, "-n", e.ns)
	}
	full = append(full, args[1:]...)
	e.t.Setenv("KUBECONFIG", s.cluster.Kubeconfig)
	r := run(e.t, "kubectl", full...)
	wantExit(e.t, r, 0)
	var out []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		name, _, _ := strings.Cut(line, "\t")
		out = append(out, name)
	}
	return out
}

func contains(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range list {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}

func TestCompletionThroughKubectl(t *testing.T) {
	e := newEnv(t)
	if got := e.complete("upgrade-s"); !contains(got, "upgrade-set", "upgrade-start", "upgrade-status") {
		t.Errorf("verbs: %v", got)
	}
	if got := e.complete("upgrade-set", ""); !contains(got, "upgrading-second-master", "upgrade-aborting") {
		t.Errorf("states: %v", got)
	}
	if got := e.complete("patch", "--validate", ""); !contains(got, "strict", "warn", "ignore") {
		t.Errorf("--validate: %v", got)
	}
	if got := e.complete("patch", "--set", "networking.p"); !contains(got, "networking.podSubnet") {
		t.Errorf("paths: %v", got)
	}
	if got := e.complete("ed"); !contains(got, "edit") {
		t.Errorf("verbs: %v", got)
	}
	if got := e.complete("edit", "--validate", ""); !contains(got, "strict", "warn", "ignore") {
		t.Errorf("edit --validate: %v", got)
	}
	if got := e.complete("edit", "--dry-run="); !contains(got, "none", "client", "server") {
		t.Errorf("edit --dry-run: %v", got)
	}
	if got := e.complete("edit", ""); len(got) != 0 {
		t.Errorf("edit takes no arguments, yet completes %v", got)
	}
	// Node names come from the state ConfigMap.
	wantExit(t, e.plugin("upgrade-start", "--to", "v1.37.3"), 0)
	wantExit(t, e.plugin("upgrade-host", "controller-7", "upgrading-etcd"), 0)
	if got := e.complete("upgrade-host", ""); !contains(got, "controller-7") {
		t.Errorf("nodes: %v", got)
	}
	if got := e.complete("upgrade-host", "controller-7", ""); !contains(got, "upgraded-etcd", "none") {
		t.Errorf("host statuses: %v", got)
	}
	// Backup names come from --backup-dir.
	dir := t.TempDir()
	r := e.plugin("backup", "--backup-dir", dir)
	wantExit(t, r, 0)
	name := strings.TrimSpace(r.stdout[strings.LastIndex(r.stdout, "/")+1:])
	if got := e.complete("restore", "--backup-dir", dir, ""); !contains(got, name) {
		t.Errorf("backups: %v, want %s", got, name)
	}
}

func TestVersionAndHelp(t *testing.T) {
	r := run(t, "kubectl", "kubeadmcfg", "version", "-o", "json")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, `"version"`) {
		t.Fatalf("%s", r)
	}
	r = run(t, "kubectl", "kubeadmcfg", "patch", "--help")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "kubectl kubeadmcfg patch") {
		t.Fatalf("help does not read as kubectl kubeadmcfg: %s", r.stdout[:200])
	}
}
