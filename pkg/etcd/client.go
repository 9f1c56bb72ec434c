// Package etcd guards a change to one node's local member of a stacked
// kubeadm etcd cluster, so that a reconfiguration never costs the cluster
// its quorum: before the change, every member is healthy, no alarm is
// raised, the members are the control-plane nodes and quorum survives this
// member being down (Preflight); a snapshot of the member goes into the
// backup store (Snapshot); after the change, the member is back with the
// same ID, caught up with the leader, and the cluster healthy again
// (WaitBack).
//
// It talks to etcd through clientv3 with the node's own etcd client
// certificate from kubeadm's pki, with a short timeout on every call. It
// never changes the cluster and prints nothing: refusals are typed errors
// carrying exit code 4, and the caller decides what a member that does not
// come back means.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// DefaultCertificatesDir is kubeadm's certificatesDir when the
// ClusterConfiguration does not set one.
const DefaultCertificatesDir = "/etc/kubernetes/pki"

// DefaultTimeout bounds every call to etcd: a member that does not answer
// a status within it is taken for down, not waited for.
const DefaultTimeout = 5 * time.Second

// Credentials are the files of the client certificate etcd is reached
// with, and of the CA its serving certificates are checked against.
type Credentials struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// clientCerts are kubeadm's client certificates for etcd, relative to
// certificatesDir, in the order they are tried: the one kubeadm makes for
// health checks, then the API server's.
var clientCerts = [][2]string{
	{"etcd/healthcheck-client.crt", "etcd/healthcheck-client.key"},
	{"apiserver-etcd-client.crt", "apiserver-etcd-client.key"},
}

// FindCredentials picks kubeadm's etcd client certificate in
// certificatesDir: etcd/healthcheck-client, else apiserver-etcd-client,
// with the etcd CA etcd/ca.crt. Those files are root's on a kubeadm node.
func FindCredentials(certificatesDir string) (Credentials, error) {
	ca := filepath.Join(certificatesDir, "etcd", "ca.crt")
	errs := []error{readable(ca)}
	if errs[0] == nil {
		for _, pair := range clientCerts {
			cert, key := filepath.Join(certificatesDir, pair[0]), filepath.Join(certificatesDir, pair[1])
			err := errors.Join(readable(cert), readable(key))
			if err == nil {
				return Credentials{CAFile: ca, CertFile: cert, KeyFile: key}, nil
			}
			errs = append(errs, err)
		}
	}
	err := fmt.Errorf("no etcd client certificate in %s: %w", certificatesDir, errors.Join(errs...))
	if errors.Is(err, fs.ErrPermission) {
		return Credentials{}, exitcode.New(exitcode.Forbidden, fmt.Errorf("%w (run as root on the node)", err))
	}
	return Credentials{}, exitcode.New(exitcode.NotFound, fmt.Errorf("%w (is this a control-plane node with a stacked etcd?)", err))
}

// readable reports why a file cannot be read; nil when it can.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// Config says how to reach the node's local member.
type Config struct {
	// Endpoints are the local member's client URLs (LocalEndpoints reads
	// them from its manifest). Every member's own URLs come from the
	// member list.
	Endpoints   []string
	Credentials Credentials
	// Timeout bounds each call (DefaultTimeout when zero); a snapshot's
	// stream may last longer, but never stall longer.
	Timeout time.Duration
}

// Client reaches the node's local etcd member, and through the member list
// every other member, each on its own endpoints.
type Client struct {
	timeout time.Duration
	tls     *tls.Config
	local   *clientv3.Client

	mu      sync.Mutex
	members map[string]*clientv3.Client // by endpoint
}

// New builds a client for cfg. It does not connect yet: the first call
// does, within its timeout.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("no endpoint for the local etcd member")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	tlsConfig, err := transport.TLSInfo{
		CertFile: cfg.Credentials.CertFile, KeyFile: cfg.Credentials.KeyFile, TrustedCAFile: cfg.Credentials.CAFile,
	}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	c := &Client{timeout: cfg.Timeout, tls: tlsConfig, members: map[string]*clientv3.Client{}}
	if c.local, err = c.dial(cfg.Endpoints); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) dial(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         c.tls.Clone(),
		DialTimeout: c.timeout,
		Logger:      zap.NewNop(), // the client's own log lines are not the plugin's output
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	return cli, nil
}

// member returns a client for one endpoint of one member, so that a read
// through it is answered by that member and no other.
func (c *Client) member(endpoint string) (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cli, ok := c.members[endpoint]; ok {
		return cli, nil
	}
	cli, err := c.dial([]string{endpoint})
	if err != nil {
		return nil, err
	}
	c.members[endpoint] = cli
	return cli, nil
}

// Close closes every connection the client opened.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := []error{c.local.Close()}
	for ep, cli := range c.members {
		errs = append(errs, cli.Close())
		delete(c.members, ep)
	}
	return errors.Join(errs...)
}

// call bounds one call to etcd by the client's timeout.
func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}
