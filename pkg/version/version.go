// Package version reports the build the plugin came from. The release build
// sets these variables with -ldflags -X; a plain go build reports "dev".
package version

// Set by -ldflags "-X github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version.Version=...".
var (
	Version = "dev"
	Commit  = "unknown"
	Date    = "unknown"
)
