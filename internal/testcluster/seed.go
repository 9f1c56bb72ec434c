package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeadmInitConfig is an InitConfiguration that lets `kubeadm init phase
// upload-config` run against the loopback apiserver. The advertise address
// must be a non-loopback literal; nothing is ever sent to it.
const KubeadmInitConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 192.0.2.10
  bindPort: 6443
nodeRegistration:
  name: controller-0
  criSocket: unix:///var/run/containerd/containerd.sock
`

// DefaultClusterConfig is the ClusterConfiguration the seed uploads unless a
// caller gives another. kubernetesVersion is explicit so kubeadm never looks
// a version up on the network.
const DefaultClusterConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
clusterName: kubernetes
controlPlaneEndpoint: 192.0.2.10:6443
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
apiServer:
  certSANs:
  - 192.0.2.10
  extraArgs:
  - name: audit-log-maxage
    value: "30"
controllerManager:
  extraArgs:
  - name: node-cidr-mask-size
    value: "24"
`

// Kubeadm runs the built kubeadm with args and returns its combined output.
func (c *Cluster) Kubeadm(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Bins.Kubeadm, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubeadm %v: %w: %s", args, err, out)
	}
	return out, nil
}

// SeedKubeadm uploads clusterConfig (DefaultClusterConfig when empty) to
// kube-system/kubeadm-config with the real `kubeadm init phase upload-config
// kubeadm` and returns the ClusterConfiguration document kubeadm stored.
func (c *Cluster) SeedKubeadm(ctx context.Context, clusterConfig string) (string, error) {
	if clusterConfig == "" {
		clusterConfig = DefaultClusterConfig
	}
	file := filepath.Join(c.Dir, "kubeadm-seed.yaml")
	if err := os.WriteFile(file, []byte(KubeadmInitConfig+"---\n"+clusterConfig), 0o600); err != nil {
		return "", err
	}
	if _, err := c.Kubeadm(ctx, "init", "phase", "upload-config", "kubeadm", "--config", file, "--kubeconfig", c.Kubeconfig); err != nil {
		return "", err
	}
	cs, err := c.Clientset()
	if err != nil {
		return "", err
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return cm.Data["ClusterConfiguration"], nil
}

// PutConfigMap creates namespace ns (if needed) and a ConfigMap name in it
// holding data, replacing any ConfigMap of that name. Tests use it to give
// each test its own kubeadm-config, and to seed documents kubeadm refuses to
// upload itself (v1beta3).
func (c *Cluster) PutConfigMap(ctx context.Context, ns, name string, data map[string]string) (*corev1.ConfigMap, error) {
	cs, err := c.Clientset()
	if err != nil {
		return nil, err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	err = cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       data,
	}, metav1.CreateOptions{})
}
