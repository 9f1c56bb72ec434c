package etcd_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
)

// A change to one node's etcd member, in the order reconfigure makes it:
// the node's client from its manifest and kubeadm's pki, the checks, a
// snapshot, the change, and the wait for the member to be back. (Not run:
// it needs a control-plane node.)
func Example() {
	if err := changeMember(context.Background(), "cp-1", []string{"cp-0", "cp-1", "cp-2"}); err != nil {
		log.Fatal(err)
	}
}

func changeMember(ctx context.Context, node string, controlPlane []string) error {
	endpoints, err := etcd.LocalEndpoints(etcd.DefaultManifest)
	if err != nil {
		return err // external etcd, or not a control-plane node
	}
	creds, err := etcd.FindCredentials(etcd.DefaultCertificatesDir)
	if err != nil {
		return err
	}
	client, err := etcd.New(etcd.Config{Endpoints: endpoints, Credentials: creds})
	if err != nil {
		return err
	}
	defer client.Close()

	cl, err := client.Preflight(ctx, etcd.PreflightOptions{Nodes: controlPlane})
	if err != nil {
		return err // exit code 4, naming the members in the way
	}
	store := &backup.Store{Dir: backup.DefaultDir()}
	if _, err := client.Snapshot(ctx, store, etcd.SnapshotOptions{Node: node}); err != nil {
		return err
	}
	// ... replace /etc/kubernetes/manifests/etcd.yaml ...
	member, _ := cl.LocalMember()
	_, err = client.WaitBack(ctx, member, etcd.WaitOptions{})
	return err // a *NotBackError: put the previous manifest back
}

// Whether a member may be changed is judged on the cluster as read, so a
// rollout can show why it waits: here a three-member cluster whose third
// member does not answer.
func ExampleCheckPreflight() {
	member := func(id uint64, name string) etcd.Member {
		return etcd.Member{ID: id, Name: name, ClientURLs: []string{"https://" + name + ":2379"}, Status: &etcd.Status{Leader: 1}}
	}
	cl := &etcd.Cluster{Local: 2, Members: []etcd.Member{member(1, "cp-0"), member(2, "cp-1"), member(3, "cp-2")}}
	fmt.Println(etcd.CheckPreflight(cl, etcd.PreflightOptions{Nodes: []string{"cp-0", "cp-1", "cp-2"}}))
	cl.Members[2].Status, cl.Members[2].Problem = nil, "it does not answer"
	fmt.Println(etcd.CheckPreflight(cl, etcd.PreflightOptions{Nodes: []string{"cp-0", "cp-1", "cp-2"}}))
	// Output:
	// <nil>
	// refusing to change etcd member cp-1: etcd member cp-2 (ID 3, https://cp-2:2379) is unhealthy: it does not answer (bring it back first); with it down, 1 of 3 voting members would be healthy, and quorum needs 2
}
