package upgrade

import (
	"errors"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// versionArg names the argument or flag name in err, a refusal of
// upgradestate.CheckVersion or CheckAgentsVersion (nil for nil): one line,
// exit 2.
func versionArg(name string, err error) error {
	var bad *upgradestate.VersionError
	var pre *upgradestate.PreReleaseError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &bad):
		why := ""
		if bad.Why != "" {
			why = ": " + bad.Why
		}
		return exitcode.Usagef("%s must be a Kubernetes version such as v1.37.2, not %q%s", name, bad.Version, why)
	case errors.As(err, &pre):
		return exitcode.Usagef("%s: %w", name, pre)
	}
	return err
}
