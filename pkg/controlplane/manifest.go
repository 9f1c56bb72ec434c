package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// AdvertiseEndpointAnnotation is where kubeadm records, on the
// kube-apiserver manifest, the endpoint the node's API server advertises.
// `kubeadm upgrade node` reads a node's own values back from it; so does
// reconfigure.
const AdvertiseEndpointAnnotation = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"

// Manifest is a static Pod manifest: its bytes and the Pod they decode to.
type Manifest struct {
	Raw []byte
	Pod *corev1.Pod
}

// ParseManifest decodes a static Pod manifest. kubeadm never writes YAML
// anchors or aliases, but the kubelet, which runs the manifest, reads them
// (sigs.k8s.io/yaml, as kubeadm does), so a manifest edited by hand to
// hold some is read as the kubelet reads it rather than refused: the
// plugin judges the Pod the node runs, and keeps the bytes only to put
// them back. Only the rendered manifest's bytes are edited
// (KeepInitialCluster), and those are kubeadm's own. Text of more than
// 2 MiB, or whose aliases expand it past the bound every input has (see
// internal/input), is refused unexpanded.
func ParseManifest(data []byte) (*Manifest, error) {
	var pod corev1.Pod
	err := input.Unmarshal(data, &pod)
	if input.Refused(err) {
		return nil, fmt.Errorf("the manifest cannot be used: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("not a Pod manifest: %w", err)
	}
	if pod.Kind != "Pod" || len(pod.Spec.Containers) == 0 {
		return nil, errors.New("not a Pod manifest with a container")
	}
	return &Manifest{Raw: data, Pod: &pod}, nil
}

// ReadManifest reads and decodes the manifest at path, of at most 2 MiB.
func ReadManifest(path string) (*Manifest, error) {
	data, err := input.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// SameAs reports whether two manifests describe the same Pod, as kubeadm
// compares them: decoded, so comments and formatting do not count.
func (m *Manifest) SameAs(other *Manifest) bool {
	return equality.Semantic.DeepEqual(m.Pod, other.Pod)
}

// MirrorPodName is the name of the mirror Pod the kubelet of node publishes
// for this static Pod.
func (m *Manifest) MirrorPodName(node string) string { return m.Pod.Name + "-" + node }

// Namespace is the static Pod's namespace (kube-system for kubeadm's).
func (m *Manifest) Namespace() string {
	if m.Pod.Namespace == "" {
		return "kube-system"
	}
	return m.Pod.Namespace
}

// Probe is an HTTP health check taken from a manifest.
type Probe struct {
	Scheme string
	Host   string
	Port   int
	Path   string
}

// URL is what the probe requests.
func (p Probe) URL() string {
	return fmt.Sprintf("%s://%s%s", strings.ToLower(p.Scheme), net.JoinHostPort(p.Host, strconv.Itoa(p.Port)), p.Path)
}

// Check requests the probe's URL once and succeeds on a status from 200 to
// 399, as the kubelet does. Like the kubelet it does not verify the serving
// certificate: the component's health is the question, not its identity.
func (p Probe) Check(ctx context.Context, client *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// Probe returns the manifest's own health check: the first container's
// startup probe, else its liveness probe, else its readiness probe, with a
// named port resolved through the container's ports. An empty host is the
// node itself (static Pods use the host's network), probed on 127.0.0.1.
func (m *Manifest) Probe() (Probe, error) {
	c := m.Pod.Spec.Containers[0]
	return m.probe(c.StartupProbe, c.LivenessProbe, c.ReadinessProbe)
}

// ReadinessProbe is the manifest's readiness probe, else its Probe: for
// kube-apiserver, /readyz, which answers only once it serves with its
// storage, where /livez answers as soon as it runs.
func (m *Manifest) ReadinessProbe() (Probe, error) {
	c := m.Pod.Spec.Containers[0]
	return m.probe(c.ReadinessProbe, c.StartupProbe, c.LivenessProbe)
}

// probe is the first HTTP probe of probes.
func (m *Manifest) probe(probes ...*corev1.Probe) (Probe, error) {
	c := m.Pod.Spec.Containers[0]
	var handler *corev1.HTTPGetAction
	for _, p := range probes {
		if p != nil && p.HTTPGet != nil {
			handler = p.HTTPGet
			break
		}
	}
	if handler == nil {
		return Probe{}, fmt.Errorf("the %s manifest has no HTTP probe to check its health with", m.Pod.Name)
	}
	port, err := resolvePort(handler.Port, c.Ports)
	if err != nil {
		return Probe{}, fmt.Errorf("the %s manifest's probe: %w", m.Pod.Name, err)
	}
	p := Probe{Scheme: string(handler.Scheme), Host: handler.Host, Port: port, Path: handler.Path}
	if p.Scheme == "" {
		p.Scheme = string(corev1.URISchemeHTTP)
	}
	if p.Host == "" {
		p.Host = "127.0.0.1"
	}
	if p.Path == "" {
		p.Path = "/"
	}
	return p, nil
}

func resolvePort(port intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("no container port is named %q", port.StrVal)
}

// Discover reads this node's own values back from its running
// kube-apiserver manifest in dir, as `kubeadm upgrade node` does: the
// advertise address and port from kubeadm's annotation, and the image pull
// policy. Values already set in n are kept.
func Discover(dir string, n clusterconfig.NodeConfig) (clusterconfig.NodeConfig, error) {
	if n.AdvertiseAddress != "" && n.BindPort != 0 && n.ImagePullPolicy != "" {
		return n, nil
	}
	path := filepath.Join(dir, APIServer.File())
	m, err := ReadManifest(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && n.AdvertiseAddress != "" {
			return n, nil
		}
		return n, &DiscoveryError{Err: err}
	}
	if n.ImagePullPolicy == "" {
		n.ImagePullPolicy = string(m.Pod.Spec.Containers[0].ImagePullPolicy)
	}
	if n.AdvertiseAddress != "" && n.BindPort != 0 {
		return n, nil
	}
	endpoint := m.Pod.Annotations[AdvertiseEndpointAnnotation]
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		if n.AdvertiseAddress != "" {
			return n, nil
		}
		return n, &DiscoveryError{Err: fmt.Errorf("%s has no usable %s annotation (%q)", path, AdvertiseEndpointAnnotation, endpoint)}
	}
	if n.AdvertiseAddress == "" {
		n.AdvertiseAddress = host
	}
	if n.BindPort == 0 {
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			return n, &DiscoveryError{Err: fmt.Errorf("%s: bad port in %s: %q", path, AdvertiseEndpointAnnotation, endpoint)}
		}
		n.BindPort = int32(p)
	}
	return n, nil
}

// DiscoveryError is a node value that could not be read back from the
// running manifests; the caller can give it instead.
type DiscoveryError struct{ Err error }

func (e *DiscoveryError) Error() string {
	return "cannot discover this node's advertise address: " + e.Err.Error()
}

func (e *DiscoveryError) Unwrap() error { return e.Err }

// NodeName is this node's default name, as kubeadm derives it: the
// hostname, lowercased.
func NodeName() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return strings.ToLower(strings.TrimSpace(host)), nil
}
