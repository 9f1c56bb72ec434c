package e2e

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
)

// Review A3: the render the agents' alarm and reconfigure rest on works
// with the real kubeadm of each release the harness builds, 1.36 as 1.37:
// `kubeadm init phase control-plane|etcd local --dry-run` writes every
// component's manifest into KUBEADM_INIT_DRYRUN_DIR, with its release's
// images, and nothing under /etc/kubernetes. So a node of a v1.36 cluster
// gets a verdict before its upgrade to 1.37.
func TestRenderWithEachKubeadm(t *testing.T) {
	listing := func() []string {
		entries, _ := os.ReadDir("/etc/kubernetes/tmp")
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	// kubeadm checks that the advertise address is one of the host's:
	// loopback is refused.
	address := ""
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && ip.IP.IsGlobalUnicast() && address == "" {
			address = ip.IP.String()
		}
	}
	if address == "" {
		t.Fatalf("this host has no global IPv4 address for kubeadm to advertise: %v", addrs)
	}
	for _, r := range s.cluster.Bins.Releases() {
		t.Run(r.Version, func(t *testing.T) {
			doc := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: " + r.Version + "\n")
			file, err := clusterconfig.ConfigFile(doc, "kubeadm.k8s.io/v1beta4",
				clusterconfig.NodeConfig{Name: "cp-0", AdvertiseAddress: address, BindPort: 6443, ImagePullPolicy: "IfNotPresent"})
			if err != nil {
				t.Fatal(err)
			}
			renderer := controlplane.Renderer{Kubeadm: r.Kubeadm}
			v, err := renderer.Version(context.Background())
			if err != nil {
				t.Fatalf("kubeadm %s is refused: %v", r.Version, err)
			}
			if err := controlplane.CheckKubeadmRelease(v, r.Version); err != nil {
				t.Fatal(err)
			}
			before := listing()
			components := append(controlplane.Components(), controlplane.Etcd)
			rendered, err := renderer.Render(context.Background(), file, components)
			if err != nil {
				t.Fatalf("kubeadm %s does not render: %v", r.Version, err)
			}
			for _, c := range components {
				m, err := controlplane.ParseManifest(rendered[c])
				if err != nil {
					t.Fatalf("%s: %v", c.PodName(), err)
				}
				image := m.Pod.Spec.Containers[0].Image
				want := ":" + r.Version
				if c == controlplane.Etcd {
					want = ":" + strings.TrimPrefix(r.EtcdVersion, "v") + "-"
				}
				if !strings.Contains(image, want) {
					t.Errorf("kubeadm %s renders %s with image %s, want a tag %s...", r.Version, c.PodName(), image, want)
				}
			}
			if after := listing(); strings.Join(after, " ") != strings.Join(before, " ") {
				t.Errorf("kubeadm %s wrote under /etc/kubernetes/tmp: %q, was %q", r.Version, after, before)
			}
		})
	}
}
