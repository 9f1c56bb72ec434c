package kubeadmupgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
)

// checkControlPlane waits until the node's control plane runs the target,
// healthy, and its etcd member is back in a healthy cluster. settle is how
// long each component's probe must keep answering (controlplane.Options:
// 0 its default, negative one answer).
func (s *step) checkControlPlane(ctx context.Context, settle time.Duration) error {
	opts := s.options(s.req.Wait)
	opts.Settle = settle
	if err := controlplane.WaitVersion(ctx, s.node.ManifestsDir, s.node.ComponentsOnNode(), s.req.Version, opts); err != nil {
		return err
	}
	client, err := s.node.EtcdClient()
	if err != nil || client == nil {
		return err
	}
	defer client.Close()
	cl, err := client.Cluster(ctx)
	if err != nil {
		return err
	}
	m, ok := cl.LocalMember()
	if !ok {
		return fmt.Errorf("the cluster does not list this node's etcd member")
	}
	if why := etcd.CheckBack(cl, m, etcd.DefaultMaxLag); why != "" {
		return fmt.Errorf("etcd member %s: %s", m, why)
	}
	return nil
}

// options are controlplane's options for a look at the node's components.
func (s *step) options(wait time.Duration) controlplane.Options {
	return controlplane.Options{Node: s.node.Name, Pods: s.node.Config, Wait: wait,
		Progress: func(e controlplane.Event) {
			if s.req.Progress != nil {
				s.req.Progress(Event{Component: &e})
			}
		}}
}
