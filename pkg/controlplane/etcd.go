package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// A node with stacked etcd runs its member as a static Pod beside the
// control plane, rendered from the same ClusterConfiguration (etcd.local).
// reconfigure does not change it, but a node whose etcd would change does
// not run the configuration either: its etcd manifest is rendered and
// compared, so that such a run is never taken for a complete one.

// initialClusterFlags are read by etcd only when its data directory is
// empty. kubeadm renders them for a first member (the node alone, no
// state), while a member that joined runs with the cluster's members and
// "existing": the running manifest's values stand.
var initialClusterFlags = []string{"--initial-cluster=", "--initial-cluster-state="}

// ReadEtcd reads the local etcd member's manifest in dir; nil, nil when
// there is none (external etcd, or a node without a member).
func ReadEtcd(dir string) (*Manifest, error) {
	m, err := ReadManifest(filepath.Join(dir, Etcd.File()))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exitcode.Failuref("read the running etcd manifest: %w", err)
	}
	return m, nil
}

// CompareEtcd says how the rendered etcd manifest differs from the running
// one, in words ("adds --snapshot-count=12345, removes
// --snapshot-count=10000"), or "" when they are the same once the flags
// etcd reads only at its first start are taken from the running one.
func CompareEtcd(running, rendered *Manifest) string {
	a, b := withoutInitialCluster(running), withoutInitialCluster(rendered)
	if a.SameAs(b) {
		return ""
	}
	var parts []string
	ca, cb := a.Pod.Spec.Containers[0], b.Pod.Spec.Containers[0]
	if added := missingFrom(commandLine(cb), commandLine(ca)); len(added) > 0 {
		parts = append(parts, "adds "+strings.Join(added, " "))
	}
	if removed := missingFrom(commandLine(ca), commandLine(cb)); len(removed) > 0 {
		parts = append(parts, "removes "+strings.Join(removed, " "))
	}
	if ca.Image != cb.Image {
		parts = append(parts, fmt.Sprintf("image %s instead of %s", cb.Image, ca.Image))
	}
	// Drop what was said from both, and see whether anything is left.
	ca.Command, ca.Args, ca.Image = cb.Command, cb.Args, cb.Image
	a.Pod.Spec.Containers[0] = ca
	if !a.SameAs(b) {
		parts = append(parts, "changes other fields of the manifest")
	}
	return strings.Join(parts, ", ")
}

// withoutInitialCluster is a copy of m whose containers lack the
// initialClusterFlags.
func withoutInitialCluster(m *Manifest) *Manifest {
	pod := m.Pod.DeepCopy()
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Command, c.Args = dropFlags(c.Command), dropFlags(c.Args)
	}
	return &Manifest{Raw: m.Raw, Pod: pod}
}

func dropFlags(args []string) []string {
	if args == nil {
		return nil
	}
	out := []string{}
	for _, a := range args {
		keep := true
		for _, f := range initialClusterFlags {
			if strings.HasPrefix(a, f) {
				keep = false
			}
		}
		if keep {
			out = append(out, a)
		}
	}
	return out
}

func commandLine(c corev1.Container) []string {
	return append(append([]string{}, c.Command...), c.Args...)
}

// missingFrom lists the items of a that b lacks, in a's order.
func missingFrom(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}
