package agent

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// A turn that stopped before its node changed either fails the node (what
// stopped it will not pass by itself: the rollout must stop) or is tried
// again (it may pass). For etcd: a cluster that fails the checks, a
// missing client certificate or a failed snapshot fail the node; another
// member being changed, or the API unreachable, is waited out.
func TestEndsTurn(t *testing.T) {
	stage := func(s reconfigure.Stage, err error) error { return &reconfigure.StageError{Stage: s, Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no manifest", stage(reconfigure.StagePlan, exitcode.NotFoundf("no kube-apiserver manifest")), true},
		{"a version change", stage(reconfigure.StageVersion, exitcode.Conflictf("image tag")), true},
		{"kubeadm refuses the document", stage(reconfigure.StageRender, &controlplane.KubeadmError{Component: controlplane.Etcd, Err: errors.New("exit status 1")}), true},
		{"kubeadm missing", stage(reconfigure.StageRender, errors.New("exec: kubeadm: not found")), false},
		{"the manifests directory busy", stage(reconfigure.StageLock, exitcode.Conflictf("busy")), false},
		{"an upgrade in progress", stage(reconfigure.StageUpgrade, exitcode.Conflictf("upgrading")), false},
		{"an etcd member unhealthy", stage(reconfigure.StageEtcd, exitcode.New(exitcode.Conflict, &etcd.RefusedError{Member: "cp-1"})), true},
		{"no etcd client certificate", stage(reconfigure.StageEtcd, exitcode.New(exitcode.NotFound,
			&reconfigure.EtcdCredentialsError{Dir: "/etc/kubernetes/pki", Err: errors.New("no etcd client certificate")})), true},
		{"the etcd snapshot failed", stage(reconfigure.StageEtcd, &reconfigure.EtcdSnapshotError{Member: "cp-1", Err: errors.New("disk full")}), true},
		{"another etcd member being changed", stage(reconfigure.StageEtcd, exitcode.New(exitcode.Conflict,
			&reconfigure.EtcdBusyError{Lease: "kube-system/kubeadmcfg-etcd-member", Holder: "reconfigure/cp-2/1", Node: "cp-2"})), false},
		{"the API unreachable at the etcd stage", stage(reconfigure.StageEtcd, fmt.Errorf("list nodes: %w", engine.ErrUnreachable)), false},
		{"a damaged document", exitcode.Invalidf("the pinned ClusterConfiguration cannot be applied"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := endsTurn(tc.err); got != tc.want {
				t.Errorf("endsTurn(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
