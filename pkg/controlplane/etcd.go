package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// A node with stacked etcd runs its member as a static Pod beside the
// control plane, rendered from the same ClusterConfiguration (etcd.local).
// kubeadm renders it only as it renders a first member
// (`kubeadm init phase etcd local`); a member that joined was written by
// `kubeadm join` with the cluster it joined. The flags that tell the two
// apart are read by etcd only when its data directory is empty, so the
// running manifest's values stand (KeepInitialCluster): a member is never
// restarted for them, and its manifest keeps saying how it joined.

// initialClusterFlags are read by etcd only when its data directory is
// empty. kubeadm renders them for a first member (the node alone, no
// state), while a member that joined runs with the cluster's members and
// "existing": the running manifest's values stand.
var initialClusterFlags = []string{"--initial-cluster=", "--initial-cluster-state="}

// KeepInitialCluster returns the rendered etcd manifest with the running
// one's --initial-cluster and --initial-cluster-state (a flag the running
// manifest lacks is dropped): the manifest kubeadm would have written for
// this member, as `kubeadm join` writes it, with the state right after the
// cluster where kubeadm's sorted arguments put it. The bytes are kubeadm's,
// but for those lines, and the result is checked to differ from the
// rendered Pod in nothing else; a manifest it cannot edit so (no
// --initial-cluster in its command) is an error.
func KeepInitialCluster(running, rendered *Manifest) (*Manifest, error) {
	var keep []string // the running manifest's initial cluster flags, in order
	for _, f := range initialClusterFlags {
		if v, ok := flagValue(running, f); ok {
			keep = append(keep, f+v)
		}
	}
	lines := bytes.SplitAfter(rendered.Raw, []byte("\n"))
	var out [][]byte
	found := 0
	for _, line := range lines {
		item := strings.TrimLeft(string(line), " ")
		indent := string(line[:len(line)-len(item)])
		switch {
		case strings.HasPrefix(item, "- "+initialClusterFlags[1]):
			// dropped: written after --initial-cluster when it is kept
		case strings.HasPrefix(item, "- "+initialClusterFlags[0]):
			found++
			for _, arg := range keep {
				y, err := yaml.Marshal([]string{arg}) // quoted as kubeadm's emitter quotes
				if err != nil {
					return nil, err
				}
				out = append(out, []byte(indent+string(y)))
			}
		default:
			out = append(out, line)
		}
	}
	if found != 1 {
		return nil, fmt.Errorf("kubeadm's etcd manifest has %d --initial-cluster lines in its command, not 1", found)
	}
	m, err := ParseManifest(bytes.Join(out, nil))
	if err != nil {
		return nil, fmt.Errorf("kubeadm's etcd manifest with the running initial cluster: %w", err)
	}
	got := m.Pod.Spec.Containers[0]
	if !withoutInitialCluster(m).SameAs(withoutInitialCluster(rendered)) ||
		!slices.Equal(keep, slices.DeleteFunc(commandLine(got), func(a string) bool { return !isInitialCluster(a) })) {
		return nil, errors.New("kubeadm's etcd manifest cannot be given the running initial cluster: its --initial-cluster is not an item of its command")
	}
	return m, nil
}

// flagValue is the value of the last flag (a prefix "--name=") in m's
// first container's command line.
func flagValue(m *Manifest, flag string) (string, bool) {
	v, ok := "", false
	for _, a := range commandLine(m.Pod.Spec.Containers[0]) {
		if rest, found := strings.CutPrefix(a, flag); found {
			v, ok = rest, true
		}
	}
	return v, ok
}

func isInitialCluster(arg string) bool {
	for _, f := range initialClusterFlags {
		if strings.HasPrefix(arg, f) {
			return true
		}
	}
	return false
}

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
		if !isInitialCluster(a) {
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
