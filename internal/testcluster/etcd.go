package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// A control plane's etcd is either the harness's own, one member named in
// etcd.external, or stacked as kubeadm builds it by default: every
// control-plane node runs a member from kubeadm's etcd.local manifest, with
// kubeadm's etcd certificates, run by the node's static Pod runner like the
// other components (etcdjoin.go adds the members after the first).

// EtcdMode is where a control plane's etcd runs.
type EtcdMode string

const (
	// EtcdExternal is one etcd member the harness runs itself, named in
	// etcd.external: the default of StartNodes and StartLocal.
	EtcdExternal EtcdMode = "external"
	// EtcdStacked is a member on every control-plane node, from kubeadm's
	// own etcd manifest, as `kubeadm init` and `kubeadm join
	// --control-plane` set it up.
	EtcdStacked EtcdMode = "stacked"
)

// ParseEtcdMode reads an EtcdMode; the empty string is EtcdExternal.
func ParseEtcdMode(s string) (EtcdMode, error) {
	switch m := EtcdMode(s); m {
	case "":
		return EtcdExternal, nil
	case EtcdExternal, EtcdStacked:
		return m, nil
	}
	return "", fmt.Errorf("etcd must be %s or %s, not %q", EtcdStacked, EtcdExternal, s)
}

// kubeadm's etcd ports (cmd/kubeadm/app/constants): a member serves clients
// on 2379 (on loopback and its node's address), peers on 2380, and its
// probes and metrics on 2381 (loopback).
const (
	etcdClientPort  = 2379
	etcdPeerPort    = 2380
	etcdMetricsPort = 2381
)

// EtcdMember is a node's stacked etcd member as its manifest runs it, with
// the node's certificates for a client of it: kubeadm's healthcheck-client,
// which kubeadm's own etcd client uses too.
type EtcdMember struct {
	Name string
	// ClientURL is the member's advertised client URL, on its node's
	// address (https://ADDRESS:2379). LocalClientURL is the loopback one the
	// node's API server uses: nodes sharing a network namespace move it off
	// 2379 with kubeadm patches (LocalNodePatches).
	ClientURL, LocalClientURL string
	PeerURL                   string
	// MetricsURL serves /livez, /readyz and /metrics over HTTP on loopback:
	// the manifest's probes ask it.
	MetricsURL string
	// DataDir is the member's data directory on disk: the manifest's
	// --data-dir, mapped into the node's root as the runner maps it.
	DataDir string
	// CAFile is the etcd CA; CertFile and KeyFile the node's
	// healthcheck-client pair.
	CAFile, CertFile, KeyFile string
}

// ReadEtcdMember reads the member the etcd manifest of the node at root
// runs, as the runner runs it: what a test that got only the node's
// directories (from hack/localcluster run) connects to.
func ReadEtcdMember(root, manifest string) (*EtcdMember, error) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil, fmt.Errorf("%s is not a Pod manifest: %w", manifest, err)
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s has no container", manifest)
	}
	c := pod.Spec.Containers[0]
	args := mapPaths(root, &pod, append(append([]string{}, c.Command...), c.Args...))
	flags := lastFlagValues(args)
	m := &EtcdMember{
		Name: flags["name"], ClientURL: flags["advertise-client-urls"], PeerURL: flags["initial-advertise-peer-urls"],
		DataDir: flags["data-dir"], CAFile: flags["trusted-ca-file"],
	}
	m.LocalClientURL = loopbackURL(flags["listen-client-urls"])
	m.MetricsURL = loopbackURL(flags["listen-metrics-urls"])
	if m.CAFile != "" {
		m.CertFile = filepath.Join(filepath.Dir(m.CAFile), "healthcheck-client.crt")
		m.KeyFile = filepath.Join(filepath.Dir(m.CAFile), "healthcheck-client.key")
	}
	if m.Name == "" || m.ClientURL == "" || m.PeerURL == "" || m.LocalClientURL == "" || m.DataDir == "" || m.CAFile == "" {
		return nil, fmt.Errorf("%s lacks an etcd member's name, URLs, data directory or CA: %+v", manifest, *m)
	}
	return m, nil
}

// lastFlagValues maps --name=value arguments to their last value: a flag
// given twice takes its last value in etcd, as in the Go flag package.
func lastFlagValues(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		rest, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		if name, value, ok := strings.Cut(rest, "="); ok {
			out[name] = value
		}
	}
	return out
}

// loopbackURL is the loopback URL of a comma-separated list.
func loopbackURL(urls string) string {
	for u := range strings.SplitSeq(urls, ",") {
		if p, err := url.Parse(u); err == nil && (p.Hostname() == "127.0.0.1" || p.Hostname() == "::1") {
			return u
		}
	}
	return ""
}

// Client returns a client of the etcd members at endpoints (this member's
// ClientURL when none are given) that authenticates with this node's
// healthcheck-client certificate. The caller closes it.
func (m *EtcdMember) Client(endpoints ...string) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		endpoints = []string{m.ClientURL}
	}
	tlsConfig, err := transport.TLSInfo{CertFile: m.CertFile, KeyFile: m.KeyFile, TrustedCAFile: m.CAFile}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate of %s: %w", m.Name, err)
	}
	return clientv3.New(clientv3.Config{
		Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 5 * time.Second,
		// Its retries while a member starts are the harness's business.
		Logger: zap.NewNop(),
	})
}

// EtcdClient returns a client of every stacked member, authenticated as
// the first node's healthcheck client; an error with external etcd. The
// caller closes it.
func (n *Nodes) EtcdClient() (*clientv3.Client, error) {
	if len(n.Nodes) == 0 || n.Nodes[0].Etcd == nil {
		return nil, errors.New("the control plane's etcd is not stacked")
	}
	return n.Nodes[0].Etcd.Client(n.EtcdEndpoints()...)
}

// EtcdEndpoints are the advertised client URLs of the stacked members, in
// node order (none with external etcd).
func (n *Nodes) EtcdEndpoints() []string {
	var out []string
	for _, node := range n.Nodes {
		if node.Etcd != nil {
			out = append(out, node.Etcd.ClientURL)
		}
	}
	return out
}

// etcdQuorum asks every endpoint for its status as kubeadm's etcd client
// does before and after a member joins, and reports whether a majority
// answered without errors; the error names those that did not.
func etcdQuorum(ctx context.Context, cli *clientv3.Client, endpoints []string) (bool, error) {
	var errs []error
	healthy := 0
	for _, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.Status(sctx, ep)
		cancel()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("the status of member %s is not available: %w", ep, err))
		case len(resp.Errors) > 0:
			errs = append(errs, fmt.Errorf("member %s is not healthy: %s", ep, strings.Join(resp.Errors, ",")))
		default:
			healthy++
		}
	}
	return healthy > len(endpoints)/2, errors.Join(errs...)
}

// waitEtcdQuorum waits until a majority of the members at endpoints answer.
func waitEtcdQuorum(ctx context.Context, cli *clientv3.Client, endpoints []string) error {
	for {
		ok, err := etcdQuorum(ctx, cli, endpoints)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd has no quorum among %s: %w", strings.Join(endpoints, ", "), errors.Join(err, ctx.Err()))
		case <-time.After(300 * time.Millisecond):
		}
	}
}
