package clusterconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConfigFile(t *testing.T) {
	cluster := []byte("apiVersion: kubeadm.k8s.io/v1\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2")
	for _, tc := range []struct {
		name string
		node NodeConfig
		want string
	}{
		{"no node values: the ClusterConfiguration alone", NodeConfig{},
			"apiVersion: kubeadm.k8s.io/v1\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2"},
		{"every node value, in an InitConfiguration of the same apiVersion", NodeConfig{
			Name: "cp-1", AdvertiseAddress: "192.0.2.11", BindPort: 6444, ImagePullPolicy: "Never", PatchesDir: "/etc/kubernetes/patches",
		}, `apiVersion: kubeadm.k8s.io/v1
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
---
apiVersion: kubeadm.k8s.io/v1
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 192.0.2.11
  bindPort: 6444
nodeRegistration:
  imagePullPolicy: Never
  name: cp-1
patches:
  directory: /etc/kubernetes/patches
`},
		{"patches alone", NodeConfig{PatchesDir: "/p"}, `apiVersion: kubeadm.k8s.io/v1
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
---
apiVersion: kubeadm.k8s.io/v1
kind: InitConfiguration
patches:
  directory: /p
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFile(cluster, "kubeadm.k8s.io/v1", tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("ConfigFile (-want +got):\n%s", diff)
			}
		})
	}
}
