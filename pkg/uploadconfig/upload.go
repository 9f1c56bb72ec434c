package uploadconfig

import (
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// Upload is what kubeadm's upload-config kubeadm phase would do to
// kube-system/kubeadm-config, as kubeadm itself says: the
// ClusterConfiguration it read, and the one it would write in its place.
type Upload struct {
	// Read is the ClusterConfiguration kubeadm read from kubeadm-config,
	// byte for byte.
	Read []byte
	// ResourceVersion is that of the kubeadm-config kubeadm read.
	ResourceVersion string
	// Written is the ClusterConfiguration kubeadm would write, byte for
	// byte: what it read, its kubernetesVersion set to the target, its
	// defaults filled in, its fields unknown to kubeadm dropped, its values
	// in kubeadm's own form (8760h is 8760h0m0s), marshalled as kubeadm
	// marshals (keys sorted, two-space indent, no comments).
	Written []byte
}

// Edit is kubeadm's change, Read to Written, as an edit that applies to
// whatever kubeadm-config holds when it is written: a three-way merge
// (clusterconfig.NewThreeWayMerge). A field only kubeadm changes takes
// kubeadm's value; a field only another writer changed since kubeadm read
// it keeps theirs (an entry appended to apiServer.certSANs stays, unless
// kubeadm changes that list too); a field both changed to different values
// is a conflict (*clusterconfig.MergeConflictError), and nothing is
// written. When nobody wrote since kubeadm read, the result is Written.
func (u *Upload) Edit() (clusterconfig.Edit, error) {
	read, err := clusterconfig.Parse(u.Read)
	if err != nil {
		return nil, fmt.Errorf("the ClusterConfiguration kubeadm read: %w", err)
	}
	written, err := clusterconfig.Parse(u.Written)
	if err != nil {
		return nil, fmt.Errorf("the ClusterConfiguration kubeadm would write: %w", err)
	}
	if read.APIVersion() != written.APIVersion() {
		return nil, fmt.Errorf("kubeadm would write kubeadm-config as %s, converted from %s: a conversion is not an edit that can be merged with other writers' changes",
			written.APIVersion(), read.APIVersion())
	}
	return clusterconfig.NewThreeWayMerge(read, written)
}
