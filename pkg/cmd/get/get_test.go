package get

import (
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestGetValidate(t *testing.T) {
	o := NewOptions(cmdutil.NewClusterFlags(), streams)
	bad := NewOptions(cmdutil.NewClusterFlags(), streams)
	bad.Key = ""
	noTime := NewOptions(cmdutil.NewClusterFlags(), streams)
	noTime.Timeout = 0
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{{"valid", o, ""}, {"key", bad, "--key must not be empty"},
		{"timeout", noTime, "--timeout must be positive, not 0s"}})
}
