// Package imagecheck holds the check of the agent's container image that
// make dist writes (hack/tools/release/image): read with the standard
// library alone, not with the library that wrote it, against the OCI image
// layout and the DaemonSet that runs the image. It has no code of its own:
// the check is a test, run by hack/dist.sh with KUBEADMCFG_IMAGE set.
package imagecheck
