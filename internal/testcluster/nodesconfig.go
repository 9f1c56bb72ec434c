package testcluster

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// The ClusterConfiguration of a StartNodes control plane, and the options'
// defaults.

// NodesClusterConfig is a ClusterConfiguration for StartNodes: Kubernetes
// version, external etcd at etcdURL, the load balancer's endpoint.
func NodesClusterConfig(version, endpoint, etcdURL string) string {
	return clusterConfig(version, endpoint, fmt.Sprintf(`etcd:
  external:
    endpoints:
    - %s
`, etcdURL))
}

// StackedClusterConfig is a ClusterConfiguration for StartNodes with a
// stacked etcd: NodesClusterConfig's, with etcd.local and kubeadm's default
// data directory, which the runner maps into each node's root.
func StackedClusterConfig(version, endpoint string) string {
	return clusterConfig(version, endpoint, `etcd:
  local:
    dataDir: /var/lib/etcd
`)
}

// clusterConfig is the ClusterConfiguration of StartNodes with the given
// version and etcd section.
func clusterConfig(version, endpoint, etcd string) string {
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %s
clusterName: kubernetes
controlPlaneEndpoint: %s
%snetworking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
apiServer:
  extraArgs:
  - name: audit-log-maxage
    value: "30"
controllerManager:
  extraArgs:
  - name: node-cidr-mask-size
    value: "24"
`, version, endpoint, etcd)
}

// complete fills in the defaults, refuses a ClusterConfiguration whose etcd
// is not where Etcd says, and returns the built release of its
// kubernetesVersion.
func (o *NodesOptions) complete(bins Binaries) (Release, error) {
	mode, err := ParseEtcdMode(string(o.Etcd))
	if err != nil {
		return Release{}, err
	}
	o.Etcd = mode
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.KubernetesVersion == "" && o.ClusterConfig == "" {
		o.KubernetesVersion = bins.Version
	}
	if mode == EtcdStacked {
		o.EtcdURL = ""
		if o.ClusterConfig == "" {
			o.ClusterConfig = StackedClusterConfig(o.KubernetesVersion, o.Endpoint)
		}
	} else {
		if o.EtcdURL == "" {
			o.EtcdURL = "http://127.0.0.1:2379"
		}
		if o.ClusterConfig == "" {
			o.ClusterConfig = NodesClusterConfig(o.KubernetesVersion, o.Endpoint, o.EtcdURL)
		}
	}
	var cfg struct {
		KubernetesVersion string `json:"kubernetesVersion"`
		Etcd              struct {
			Local    *struct{} `json:"local"`
			External *struct{} `json:"external"`
		} `json:"etcd"`
	}
	if err := yaml.Unmarshal([]byte(o.ClusterConfig), &cfg); err != nil {
		return Release{}, fmt.Errorf("the ClusterConfiguration: %w", err)
	}
	if stacked := cfg.Etcd.External == nil; stacked != (mode == EtcdStacked) {
		return Release{}, fmt.Errorf("the ClusterConfiguration's etcd is not %s, as the options say", mode)
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = cfg.KubernetesVersion
	}
	if cfg.KubernetesVersion != o.KubernetesVersion {
		return Release{}, fmt.Errorf("the ClusterConfiguration's kubernetesVersion is %q, not %s as the options say", cfg.KubernetesVersion, o.KubernetesVersion)
	}
	return bins.Release(o.KubernetesVersion)
}
