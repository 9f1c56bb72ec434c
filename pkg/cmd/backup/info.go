package backup

import (
	"strings"
	"time"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

// Info is one backup as list, backup and verify print it with -o.
type Info struct {
	// Kind tells a ClusterConfiguration backup from an etcd snapshot
	// (EtcdSnapshotInfo) in list's and verify's output.
	Kind              string    `json:"kind"`
	Name              string    `json:"name"`
	Path              string    `json:"path"`
	Time              time.Time `json:"time"`
	Server            string    `json:"server"`
	ConfigMap         string    `json:"configMap"`
	UID               string    `json:"uid"`
	ResourceVersion   string    `json:"resourceVersion"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	APIVersion        string    `json:"apiVersion"`
	Size              int64     `json:"size"`
	SHA256            string    `json:"sha256"`
	ChecksumOK        bool      `json:"checksumOK"`
	Reason            string    `json:"reason"`
	Problems          []string  `json:"problems,omitempty"`
	// LastKnownGoodOf are the nodes whose last known good this is
	// (reconfigure), and Manifests the manifests its run replaced.
	LastKnownGoodOf []string `json:"lastKnownGoodOf,omitempty"`
	Manifests       []string `json:"manifests,omitempty"`
}

func newInfo(b *backupstore.Backup, problems []string) Info {
	return Info{
		Kind: KindClusterConfiguration, Name: b.Name, Path: b.Path, Time: b.Time, Server: b.Server, ConfigMap: b.Namespace + "/" + b.ConfigMap, UID: b.UID,
		ResourceVersion: b.ResourceVersion, KubernetesVersion: b.KubernetesVersion, APIVersion: b.APIVersion,
		Size: b.Size, SHA256: b.SHA256, ChecksumOK: b.ChecksumOK(), Reason: b.Reason, Problems: problems,
	}
}

// shortUID shows the first block of a uid, enough to tell clusters apart in
// a table; -o json has it whole.
func shortUID(uid string) string {
	if head, _, ok := strings.Cut(uid, "-"); ok {
		return head
	}
	return cmdutil.OrDash(uid)
}
