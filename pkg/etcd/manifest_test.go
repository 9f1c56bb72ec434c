package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func TestLocalEndpointsOfKubeadmsManifest(t *testing.T) {
	got, err := LocalEndpoints("testdata/etcd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Loopback first: it stays on the node. The advertised URL is the
	// member list's.
	if diff := cmp.Diff([]string{"https://127.0.0.1:2379", "https://192.0.2.11:2379"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseEndpoints(t *testing.T) {
	pod := func(flags ...string) []byte {
		return []byte("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: etcd\n    command:\n    - etcd\n    - " + strings.Join(flags, "\n    - ") + "\n")
	}
	for _, tc := range []struct {
		name     string
		manifest []byte
		want     []string
		err      string
	}{
		{"every address", pod("--listen-client-urls=https://0.0.0.0:2379", "--advertise-client-urls=https://10.0.0.1:2379"),
			[]string{"https://127.0.0.1:2379", "https://10.0.0.1:2379"}, ""},
		{"every IPv6 address", pod("--listen-client-urls=https://[::]:2379", "--advertise-client-urls=https://[fd00::1]:2379"),
			[]string{"https://[::1]:2379", "https://[fd00::1]:2379"}, ""},
		{"loopback advertised", pod("--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379"),
			[]string{"https://127.0.0.1:2379"}, ""},
		{"advertised only", pod("--advertise-client-urls=https://10.0.0.1:2379,https://10.0.0.2:2379"),
			[]string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}, ""},
		{"neither", pod("--name=cp-0"), nil, "the etcd container has neither --listen-client-urls nor --advertise-client-urls"},
		{"not a Pod", []byte("- a\n- b\n"), nil, "not a Pod manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEndpoints(tc.manifest)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want error %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLocalEndpointsWithoutManifest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etcd.yaml")
	_, err := LocalEndpoints(path)
	if want := "no etcd manifest at " + path + " (external etcd, or not a control-plane node?)"; err == nil || err.Error() != want || exitcode.FromError(err) != exitcode.NotFound {
		t.Fatalf("want %q with exit code 5, got %v", want, err)
	}
}

func TestFindCredentials(t *testing.T) {
	write := func(t *testing.T, dir string, names ...string) {
		t.Helper()
		for _, n := range append(names, "etcd/ca.crt") {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("the health-check client first", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "etcd/healthcheck-client.crt", "etcd/healthcheck-client.key", "apiserver-etcd-client.crt", "apiserver-etcd-client.key")
		got, err := FindCredentials(dir)
		want := Credentials{CAFile: dir + "/etcd/ca.crt", CertFile: dir + "/etcd/healthcheck-client.crt", KeyFile: dir + "/etcd/healthcheck-client.key"}
		if err != nil || got != want {
			t.Fatalf("got %+v %v, want %+v", got, err, want)
		}
	})
	t.Run("the API server's when it has no key", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "etcd/healthcheck-client.crt", "apiserver-etcd-client.crt", "apiserver-etcd-client.key")
		got, err := FindCredentials(dir)
		if err != nil || got.CertFile != dir+"/apiserver-etcd-client.crt" || got.KeyFile != dir+"/apiserver-etcd-client.key" {
			t.Fatalf("got %+v %v", got, err)
		}
	})
	t.Run("none", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir)
		_, err := FindCredentials(dir)
		if err == nil || exitcode.FromError(err) != exitcode.NotFound ||
			!strings.HasPrefix(err.Error(), "no etcd client certificate in "+dir+": open "+dir+"/etcd/healthcheck-client.crt: no such file or directory") ||
			!strings.HasSuffix(err.Error(), "(is this a control-plane node with a stacked etcd?)") {
			t.Fatalf("got %v", err)
		}
	})
}
