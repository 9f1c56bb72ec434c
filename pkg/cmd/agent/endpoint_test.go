package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func TestRefuseOwnServer(t *testing.T) {
	cp1 := clusterconfig.NodeConfig{Name: "cp-1", AdvertiseAddress: "192.0.2.12", BindPort: 6443}
	v6 := clusterconfig.NodeConfig{Name: "cp-1", AdvertiseAddress: "2001:db8::12", BindPort: 6443}
	refusal := func(server string, nodes string) string {
		return "the kubeconfig's server " + server + " is node cp-1's own API server, which is down whenever the node's kube-apiserver " +
			"or etcd member is, and the control plane has " + nodes + " nodes: give the agent a kubeconfig whose server is the controlPlaneEndpoint " +
			"(the recipe in docs/agent.md, \"Running it with systemd\")"
	}
	for _, tc := range []struct {
		name   string
		server string
		node   clusterconfig.NodeConfig
		nodes  int
		want   string
	}{
		{"the controlPlaneEndpoint", "https://192.0.2.10:8443", cp1, 3, ""},
		{"a load balancer on the bind port", "https://192.0.2.10:6443", cp1, 3, ""},
		{"a DNS name of the endpoint", "https://k8s.example.com:6443", cp1, 3, ""},
		{"the advertise address", "https://192.0.2.12:6443", cp1, 3, refusal("https://192.0.2.12:6443", "3")},
		{"the advertise address, two nodes", "https://192.0.2.12:6443", cp1, 2, refusal("https://192.0.2.12:6443", "2")},
		{"the advertise address, one node", "https://192.0.2.12:6443", cp1, 1, ""},
		{"the advertise address, nodes unknown", "https://192.0.2.12:6443", cp1, 0, ""},
		{"the advertise address on another port", "https://192.0.2.12:8443", cp1, 3, ""},
		{"loopback on the bind port", "https://127.0.0.1:6443", cp1, 3, refusal("https://127.0.0.1:6443", "3")},
		{"another loopback address", "https://127.0.1.1:6443", cp1, 3, refusal("https://127.0.1.1:6443", "3")},
		{"localhost on the bind port", "https://LocalHost:6443", cp1, 3, refusal("https://LocalHost:6443", "3")},
		{"a local load balancer on loopback", "https://127.0.0.1:8443", cp1, 3, ""},
		{"the node's name", "https://cp-1:6443", cp1, 3, refusal("https://cp-1:6443", "3")},
		{"another node's address", "https://192.0.2.11:6443", cp1, 3, ""},
		{"https without a port, bind port 443", "https://192.0.2.12", clusterconfig.NodeConfig{Name: "cp-1", AdvertiseAddress: "192.0.2.12", BindPort: 443}, 3,
			refusal("https://192.0.2.12", "3")},
		{"https without a port, bind port 6443", "https://192.0.2.12", cp1, 3, ""},
		{"IPv6 advertise address", "https://[2001:db8::12]:6443", v6, 3, refusal("https://[2001:db8::12]:6443", "3")},
		{"IPv6 loopback", "https://[::1]:6443", v6, 3, refusal("https://[::1]:6443", "3")},
		{"IPv6 written another way", "https://[2001:0db8:0:0::12]:6443", v6, 3, refusal("https://[2001:0db8:0:0::12]:6443", "3")},
		{"bind port unknown", "https://127.0.0.1:6443", clusterconfig.NodeConfig{Name: "cp-1", AdvertiseAddress: "192.0.2.12"}, 3, ""},
		{"not a URL", "://", cp1, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := refuseOwnServer(tc.server, tc.node, tc.nodes)
			got := ""
			if err != nil {
				got = err.Error()
				if code := exitcode.FromError(err); code != exitcode.Conflict {
					t.Errorf("exit code %d, want %d", code, exitcode.Conflict)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refuseOwnServer(%q) (-want +got):\n%s", tc.server, diff)
			}
		})
	}
}

// TestCheckServerReadsTheManifest: the node's address and port come from
// its kube-apiserver manifest, as a turn reads them, and the nodes are
// listed only when the server is the node's own.
func TestCheckServerReadsTheManifest(t *testing.T) {
	dir := t.TempDir()
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  annotations:
    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: 192.0.2.12:6444
spec:
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.37.2
`
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	node := clusterconfig.NodeConfig{Name: "cp-1"}
	listed := 0
	three := func(context.Context) ([]string, error) { listed++; return []string{"cp-0", "cp-1", "cp-2"}, nil }
	ctx := context.Background()

	if err := checkServer(ctx, "https://192.0.2.10:8443", dir, node, three); err != nil || listed != 0 {
		t.Errorf("the endpoint: %v (nodes listed %d times, want none)", err, listed)
	}
	err := checkServer(ctx, "https://192.0.2.12:6444", dir, node, three)
	if exitcode.FromError(err) != exitcode.Conflict || listed != 1 {
		t.Errorf("the node's own server from its manifest: %v (exit %d, nodes listed %d times)", err, exitcode.FromError(err), listed)
	}
	unreachable := func(context.Context) ([]string, error) { return nil, exitcode.Failuref("cannot reach the API server") }
	err = checkServer(ctx, "https://127.0.0.1:6444", dir, node, unreachable)
	if want := "cannot count the control-plane nodes to check the kubeconfig's server https://127.0.0.1:6444, which is node cp-1's own API server: cannot reach the API server"; err == nil || err.Error() != want {
		t.Errorf("nodes not listed: got %v, want %q", err, want)
	}
	if err := checkServer(ctx, "https://192.0.2.12:6444", t.TempDir(), node, three); err != nil {
		t.Errorf("no manifest: the turns report it, the start is not refused: %v", err)
	}
}
