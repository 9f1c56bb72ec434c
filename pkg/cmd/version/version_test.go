package version

import (
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestVersionValidate(t *testing.T) {
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{{"version", NewOptions(streams), ""}})
}
