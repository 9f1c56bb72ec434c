package etcd

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// DefaultManifest is where kubeadm writes a node's etcd static Pod
// manifest (`kubeadm init phase etcd local`).
const DefaultManifest = "/etc/kubernetes/manifests/etcd.yaml"

// LocalEndpoints reads the client URLs of the node's own member from its
// running etcd manifest at path: the loopback URLs of
// --listen-client-urls first (they stay on the node, and kubeadm's serving
// certificate names 127.0.0.1), then --advertise-client-urls (what the
// member list shows). No manifest means no local member: external etcd, or
// not a control-plane node.
func LocalEndpoints(path string) ([]string, error) {
	data, err := input.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exitcode.NotFoundf("no etcd manifest at %s (external etcd, or not a control-plane node?)", path)
	}
	if err != nil {
		return nil, err
	}
	eps, err := ParseEndpoints(data)
	if err != nil {
		return nil, exitcode.Invalidf("%s: %w", path, err)
	}
	return eps, nil
}

// ParseEndpoints is LocalEndpoints on a manifest's bytes.
func ParseEndpoints(manifest []byte) ([]string, error) {
	var pod corev1.Pod
	if err := input.Unmarshal(manifest, &pod); err != nil {
		return nil, fmt.Errorf("not a Pod manifest: %w", err)
	}
	var args []string
	for _, c := range pod.Spec.Containers {
		if c.Name == "etcd" || len(pod.Spec.Containers) == 1 {
			args = append(append(args, c.Command...), c.Args...)
		}
	}
	var loopback, advertised []string
	for _, a := range args {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--listen-client-urls":
			for _, u := range strings.Split(value, ",") {
				if ep, ok := loopbackURL(u); ok && !slices.Contains(loopback, ep) {
					loopback = append(loopback, ep)
				}
			}
		case "--advertise-client-urls":
			for _, u := range strings.Split(value, ",") {
				if u = strings.TrimSpace(u); u != "" && !slices.Contains(advertised, u) {
					advertised = append(advertised, u)
				}
			}
		}
	}
	eps := slices.Concat(loopback, slices.DeleteFunc(advertised, func(u string) bool { return slices.Contains(loopback, u) }))
	if len(eps) == 0 {
		return nil, errors.New("the etcd container has neither --listen-client-urls nor --advertise-client-urls")
	}
	return eps, nil
}

// loopbackURL returns u when it listens on loopback, and the loopback URL
// of its port when it listens on every address.
func loopbackURL(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return "", false
	}
	ip := net.ParseIP(u.Hostname())
	switch {
	case u.Hostname() == "localhost" || ip != nil && ip.IsLoopback():
		return u.String(), true
	case ip != nil && ip.IsUnspecified():
		host := "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
		u.Host = net.JoinHostPort(host, u.Port())
		return u.String(), true
	}
	return "", false
}
