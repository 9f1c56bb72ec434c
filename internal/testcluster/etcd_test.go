package testcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// testdata/etcd-init-cp-1.yaml is what `kubeadm init phase etcd local`
// (v1.37.2) rendered for cp-1 with its stacked patches;
// etcd-join-cp-1.yaml is that file with the two arguments kubeadm join's
// getEtcdCommand sets, edited by hand.
func TestJoinManifestIsWhatKubeadmJoinWrites(t *testing.T) {
	rendered, err := os.ReadFile(filepath.Join("testdata", "etcd-init-cp-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "etcd-join-cp-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := joinManifest(rendered, "cp-0=https://192.0.2.11:2380,cp-1=https://192.0.2.12:2380")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("joined manifest (-want +got):\n%s", diff)
	}
}

func TestJoinManifestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"no --initial-cluster", "spec:\n  containers:\n  - command:\n    - etcd\n    - --name=cp-1\n",
			"the rendered etcd manifest has 0 --initial-cluster arguments, not 1"},
		{"two --initial-cluster", "    - --initial-cluster=a=https://x:2380\n    - --initial-cluster=b=https://y:2380\n",
			"the rendered etcd manifest has 2 --initial-cluster arguments, not 1"},
		{"--initial-cluster-state already", "    - --initial-cluster=a=https://x:2380\n    - --initial-cluster-state=new\n",
			"the rendered etcd manifest has --initial-cluster-state already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := joinManifest([]byte(tc.manifest), "a=https://x:2380")
			if err == nil || err.Error() != tc.want {
				t.Errorf("want error %q, got %v", tc.want, err)
			}
		})
	}
}

// kubeadm names the joining member by its node name, one without a name
// (added, not started) by its ID in hex, and keeps etcd's order.
func TestInitialCluster(t *testing.T) {
	members := []*etcdserverpb.Member{
		{ID: 0x2a, PeerURLs: []string{"https://192.0.2.13:2380"}},
		{ID: 0x10, Name: "cp-0", PeerURLs: []string{"https://192.0.2.11:2380"}},
		{ID: 0xff, PeerURLs: []string{"https://192.0.2.12:2380"}, IsLearner: true},
	}
	got := initialCluster(members, "cp-1", "https://192.0.2.12:2380")
	want := "2a=https://192.0.2.13:2380,cp-0=https://192.0.2.11:2380,cp-1=https://192.0.2.12:2380"
	if got != want {
		t.Errorf("initialCluster: want %q, got %q", want, got)
	}
}

func TestReadEtcdMember(t *testing.T) {
	got, err := ReadEtcdMember("/root/cp-1", filepath.Join("testdata", "etcd-init-cp-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := &EtcdMember{
		Name: "cp-1", ClientURL: "https://192.0.2.12:2379", LocalClientURL: "https://127.0.0.1:2389",
		PeerURL: "https://192.0.2.12:2380", MetricsURL: "http://127.0.0.1:2391", DataDir: "/root/cp-1/var/lib/etcd",
		CAFile:   "/root/cp-1/etc/kubernetes/pki/etcd/ca.crt",
		CertFile: "/root/cp-1/etc/kubernetes/pki/etcd/healthcheck-client.crt",
		KeyFile:  "/root/cp-1/etc/kubernetes/pki/etcd/healthcheck-client.key",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("member (-want +got):\n%s", diff)
	}
}

func TestParseEtcdMode(t *testing.T) {
	for in, want := range map[string]EtcdMode{"": EtcdExternal, "external": EtcdExternal, "stacked": EtcdStacked} {
		if got, err := ParseEtcdMode(in); err != nil || got != want {
			t.Errorf("ParseEtcdMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := ParseEtcdMode("Stacked")
	if want := `etcd must be stacked or external, not "Stacked"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("want error %q, got %v", want, err)
	}
}
