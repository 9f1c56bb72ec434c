package reconfigure

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
)

// ComponentsOnNode are the node's control-plane components, its local etcd
// member included when the node runs one (its manifest is there).
func (n Node) ComponentsOnNode() []controlplane.Component {
	cs := controlplane.Components()
	if _, err := os.Stat(filepath.Join(n.ManifestsDir, controlplane.Etcd.File())); err == nil {
		cs = append(cs, controlplane.Etcd)
	}
	return cs
}

// EtcdClient is a client of the node's local etcd member, with the node's
// certificate (CertificatesDir, else kubeadm's default); nil, with no
// error, on a node without a local member.
func (n Node) EtcdClient() (*etcd.Client, error) {
	path := filepath.Join(n.ManifestsDir, controlplane.Etcd.File())
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	endpoints, err := etcd.LocalEndpoints(path)
	if err != nil {
		return nil, err
	}
	certs := n.CertificatesDir
	if certs == "" {
		certs = etcd.DefaultCertificatesDir
	}
	creds, err := etcd.FindCredentials(certs)
	if err != nil {
		return nil, err
	}
	return etcd.New(etcd.Config{Endpoints: endpoints, Credentials: creds})
}
