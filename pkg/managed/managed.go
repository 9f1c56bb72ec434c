// Package managed names how the plugin marks what it creates (the upgrade
// state ConfigMap, the write queue's Leases), so every package labels them
// alike and any tool can find them with one selector.
package managed

const (
	// Label is the well-known label that says which tool manages an object.
	Label = "app.kubernetes.io/managed-by"
	// By is the plugin's value of Label, and its field manager.
	By = "kubectl-kubeadmcfg"
)

// Selector selects everything the plugin manages.
const Selector = Label + "=" + By
