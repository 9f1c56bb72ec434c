package validate

import (
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/cmdtest"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

var streams = genericiooptions.NewTestIOStreamsDiscard()

func TestValidateValidate(t *testing.T) {
	v := func(mutate func(o *Options)) *Options {
		o := NewOptions(cmdutil.NewClusterFlags(), streams)
		mutate(o)
		return o
	}
	cmdtest.CheckValidate(t, []cmdtest.ValidateCase{
		{"valid", v(func(*Options) {}), ""},
		{"kubeadm-version", v(func(o *Options) { o.KubeadmVersion = "v2.0.0" }), `--kubeadm-version: want a kubeadm 1.x release, not "v2.0.0"`},
		{"key", v(func(o *Options) { o.Key = "" }), "--key must not be empty"},
		{"timeout", v(func(o *Options) { o.Timeout = -time.Second }), "--timeout must be positive, not -1s"},
	})
}
