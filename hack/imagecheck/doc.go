// Package imagecheck holds the checks of what operators deploy the agent
// with, read with the standard library, the API types and apimachinery's
// strategic merge patch (as kubectl patch applies the DaemonSet's patches):
// the container image that make dist writes (hack/tools/release/image),
// against the OCI image layout and the DaemonSet that runs the image, run by
// hack/dist.sh with KUBEADMCFG_IMAGE set; and the DaemonSet's and the
// systemd unit's exposure of the host (what of /etc/kubernetes the agent
// sees) and stop budgets, by default and for agents that run upgrades (the
// unit's drop-in, the DaemonSet's patch, the kubelet's install script), run
// with the unit tests. It has no code of its own: the checks are tests.
package imagecheck
