package clusterconfig

import (
	"sigs.k8s.io/yaml"
)

// NodeConfig holds one control-plane node's own values. kubeadm keeps them
// in an InitConfiguration, never in the ClusterConfiguration all nodes share.
type NodeConfig struct {
	// Name is the node's name (nodeRegistration.name).
	Name string
	// AdvertiseAddress is the address the node's kube-apiserver advertises.
	AdvertiseAddress string
	// BindPort is the port the node's kube-apiserver serves on; 0 leaves
	// kubeadm's default.
	BindPort int32
	// ImagePullPolicy is nodeRegistration.imagePullPolicy, which kubeadm
	// writes into the node's static Pod manifests; empty leaves its default.
	ImagePullPolicy string
	// PatchesDir is the directory of kubeadm patches the node's manifests
	// are rendered with (patches.directory). kubeadm refuses --patches
	// beside --config, so it travels in the InitConfiguration.
	PatchesDir string
}

// IsZero reports whether no value is set.
func (n NodeConfig) IsZero() bool { return n == NodeConfig{} }

// InitConfiguration returns an InitConfiguration of apiVersion holding n's
// values. The apiVersion is the ClusterConfiguration's own: a kubeadm
// release reads both or neither.
func (n NodeConfig) InitConfiguration(apiVersion string) ([]byte, error) {
	init := map[string]any{"apiVersion": apiVersion, "kind": "InitConfiguration"}
	endpoint := map[string]any{}
	if n.AdvertiseAddress != "" {
		endpoint["advertiseAddress"] = n.AdvertiseAddress
	}
	if n.BindPort != 0 {
		endpoint["bindPort"] = n.BindPort
	}
	if len(endpoint) > 0 {
		init["localAPIEndpoint"] = endpoint
	}
	registration := map[string]any{}
	if n.Name != "" {
		registration["name"] = n.Name
	}
	if n.ImagePullPolicy != "" {
		registration["imagePullPolicy"] = n.ImagePullPolicy
	}
	if len(registration) > 0 {
		init["nodeRegistration"] = registration
	}
	if n.PatchesDir != "" {
		init["patches"] = map[string]any{"directory": n.PatchesDir}
	}
	return yaml.Marshal(init)
}

// ConfigFile returns a kubeadm config file: clusterConfig as it is, then,
// unless n is zero, an InitConfiguration of apiVersion with n's values, so
// that `kubeadm init phase control-plane` renders this node's manifests.
func ConfigFile(clusterConfig []byte, apiVersion string, n NodeConfig) ([]byte, error) {
	data := append([]byte{}, clusterConfig...)
	if n.IsZero() {
		return data, nil
	}
	init, err := n.InitConfiguration(apiVersion)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	return append(append(data, "---\n"...), init...), nil
}
