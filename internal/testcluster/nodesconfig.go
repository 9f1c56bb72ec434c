package testcluster

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// The ClusterConfiguration of a StartNodes control plane, and the options'
// defaults.

// NodesClusterConfig is a ClusterConfiguration for StartNodes: external
// etcd at etcdURL, the load balancer's endpoint.
func NodesClusterConfig(endpoint, etcdURL string) string {
	return clusterConfig(endpoint, fmt.Sprintf(`etcd:
  external:
    endpoints:
    - %s
`, etcdURL))
}

// StackedClusterConfig is a ClusterConfiguration for StartNodes with a
// stacked etcd: NodesClusterConfig's, with etcd.local and kubeadm's default
// data directory, which the runner maps into each node's root.
func StackedClusterConfig(endpoint string) string {
	return clusterConfig(endpoint, `etcd:
  local:
    dataDir: /var/lib/etcd
`)
}

// clusterConfig is the ClusterConfiguration of StartNodes with the given
// etcd section.
func clusterConfig(endpoint, etcd string) string {
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
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
`, endpoint, etcd)
}

// complete fills in the defaults and refuses a ClusterConfiguration whose
// etcd is not where Etcd says.
func (o *NodesOptions) complete() error {
	mode, err := ParseEtcdMode(string(o.Etcd))
	if err != nil {
		return err
	}
	o.Etcd = mode
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if mode == EtcdStacked {
		o.EtcdURL = ""
		if o.ClusterConfig == "" {
			o.ClusterConfig = StackedClusterConfig(o.Endpoint)
		}
	} else {
		if o.EtcdURL == "" {
			o.EtcdURL = "http://127.0.0.1:2379"
		}
		if o.ClusterConfig == "" {
			o.ClusterConfig = NodesClusterConfig(o.Endpoint, o.EtcdURL)
		}
	}
	var cfg struct {
		Etcd struct {
			Local    *struct{} `json:"local"`
			External *struct{} `json:"external"`
		} `json:"etcd"`
	}
	if err := yaml.Unmarshal([]byte(o.ClusterConfig), &cfg); err != nil {
		return fmt.Errorf("the ClusterConfiguration: %w", err)
	}
	if stacked := cfg.Etcd.External == nil; stacked != (mode == EtcdStacked) {
		return fmt.Errorf("the ClusterConfiguration's etcd is not %s, as the options say", mode)
	}
	return nil
}
