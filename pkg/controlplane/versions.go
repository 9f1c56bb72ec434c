package controlplane

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// A reconfiguration changes a node's configuration, never its versions: that
// is kubeadm upgrade's work, which also upgrades etcd and the kubelet in
// their turn. Two checks tell one from the other before anything changes.
// A rendered image tag that differs from the running one means the
// ClusterConfiguration's kubernetesVersion is not what the node runs (an
// upgrade uploaded it from another node, say). A kubeadm of another minor
// release than kubernetesVersion renders its own release's flags, which the
// other release's binaries may not know.

// ImageChange is a container whose rendered image has another tag (or
// digest) than the running one's. Another registry with the same tag is not
// a version change.
type ImageChange struct {
	Component Component
	Container string
	// Running and Rendered are the tags ("" for none), with "@digest" when
	// the image names one.
	Running, Rendered string
}

// ImageChanges lists, in the plan's order, the containers whose rendered
// image tag differs from the running one's. Containers are matched by name.
func (p *Plan) ImageChanges() []ImageChange {
	var out []ImageChange
	for _, ch := range p.Changes {
		running := map[string]string{}
		for _, c := range ch.Current.Pod.Spec.Containers {
			running[c.Name] = c.Image
		}
		for _, c := range ch.Rendered.Pod.Spec.Containers {
			image, ok := running[c.Name]
			if !ok {
				continue
			}
			if from, to := imageTag(image), imageTag(c.Image); from != to {
				out = append(out, ImageChange{Component: ch.Component, Container: c.Name, Running: from, Rendered: to})
			}
		}
	}
	return out
}

// ImageTag is what follows an image's repository: its tag, and "@digest"
// when it names one. An upgrade tells by it which release a manifest
// names, without waiting for what runs.
func ImageTag(image string) string { return imageTag(image) }

// imageTag is what follows an image's repository: its tag, and "@digest"
// when it names one.
func imageTag(image string) string {
	name, digest, hasDigest := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	if hasDigest {
		tag += "@" + digest
	}
	return tag
}

// VersionChangeError is a render that would change versions on the node.
type VersionChangeError struct {
	Changes []ImageChange
}

func (e *VersionChangeError) Error() string {
	parts := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		name := c.Component.PodName()
		if c.Container != name {
			name += " container " + c.Container
		}
		parts[i] = fmt.Sprintf("%s: image tag %s -> %s", name, orNone(c.Running), orNone(c.Rendered))
	}
	return fmt.Sprintf("the rendered manifests change versions (%s): upgrade the node with kubeadm instead", strings.Join(parts, ", "))
}

func orNone(tag string) string {
	if tag == "" {
		return "(none)"
	}
	return tag
}

// KubeadmReleaseError is a kubeadm of another minor release than the
// ClusterConfiguration's kubernetesVersion, or a kubernetesVersion that
// names no release to compare it with.
type KubeadmReleaseError struct {
	Kubeadm, KubernetesVersion string
	// NoRelease: kubernetesVersion is empty or a label such as stable-1.
	NoRelease bool
}

func (e *KubeadmReleaseError) Error() string {
	if e.NoRelease {
		return fmt.Sprintf("kubernetesVersion %q names no release to check kubeadm %s against: set it to the release the cluster runs", e.KubernetesVersion, e.Kubeadm)
	}
	return fmt.Sprintf("kubeadm %s is of another minor release than kubernetesVersion %s, and renders its own release's flags: use the kubeadm of the cluster's release",
		e.Kubeadm, e.KubernetesVersion)
}

// CheckKubeadmRelease returns a KubeadmReleaseError unless kubeadm (as
// Renderer.Version reports it) and kubernetesVersion (as the
// ClusterConfiguration holds it, with kubeadm's "ci/" and "release/"
// prefixes) are of the same minor release. Patch releases may differ, as
// kubeadm upgrade allows.
func CheckKubeadmRelease(kubeadm, kubernetesVersion string) error {
	k, err := version.ParseGeneric(kubeadm)
	if err != nil {
		return fmt.Errorf("kubeadm reports version %q: %w", kubeadm, err)
	}
	v := kubernetesVersion
	if i := strings.LastIndex(v, "/"); i >= 0 {
		v = v[i+1:]
	}
	cluster, err := version.ParseGeneric(v)
	if err != nil {
		return &KubeadmReleaseError{Kubeadm: kubeadm, KubernetesVersion: kubernetesVersion, NoRelease: true}
	}
	if k.Major() != cluster.Major() || k.Minor() != cluster.Minor() {
		return &KubeadmReleaseError{Kubeadm: kubeadm, KubernetesVersion: kubernetesVersion}
	}
	return nil
}
