package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"sigs.k8s.io/yaml"
)

// The first node's member starts from the manifest `kubeadm init phase etcd
// local` renders. The others join as `kubeadm join --control-plane` adds
// them in kubeadm 1.37 (the check-etcd and control-plane-join etcd phases:
// cmd/kubeadm/app/phases/etcd/local.go, CreateStackedEtcdStaticPodManifestFile,
// and cmd/kubeadm/app/util/etcd), with the joining node's own
// healthcheck-client certificate:
//
//  1. a majority of the members answer Status (check-etcd);
//  2. the member is added as a learner (MemberAddAsLearner), unless a member
//     has its peer URL already, which makes a retry harmless;
//  3. its data directory is created (0700) and its manifest written: the one
//     kubeadm renders, with --initial-cluster naming the members of the
//     add's answer in that order (the new one by its node name, one
//     without a name yet by its ID in hex) and --initial-cluster-state=existing.
//     The node's kubelet, here its runner, already runs and starts it;
//  4. once the learner has started it is promoted (MemberPromote, retried
//     while it catches up with the leader);
//  5. a majority of the members, the new one among them, answer again.
//
// kubeadm finds the members' client URLs on the etcd mirror Pods
// (kubeadm.kubernetes.io/etcd.advertise-client-urls); the harness knows
// them from the nodes it set up, which is the same list.

// etcdJoinTimeout bounds one member's join, as kubeadm's etcd API calls are.
const etcdJoinTimeout = 3 * time.Minute

// initEtcd writes the first node's etcd manifest, as `kubeadm init` does.
func (n *Nodes) initEtcd(ctx context.Context, node *Node, configFile string) error {
	data, err := n.renderEtcd(ctx, node, configFile)
	if err != nil {
		return err
	}
	return installEtcd(node, data)
}

// joinEtcd adds node's member to the running members, as `kubeadm join
// --control-plane` does; node's runner must be running.
func (n *Nodes) joinEtcd(ctx context.Context, node *Node, configFile string, log func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, etcdJoinTimeout)
	defer cancel()
	endpoints := n.EtcdEndpoints()
	own := etcdCerts(node.Root)
	own.Name = node.Name
	cli, err := own.Client(endpoints...)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := waitEtcdQuorum(ctx, cli, endpoints); err != nil {
		return fmt.Errorf("before adding a member: %w", err)
	}
	peerURL := "https://" + net.JoinHostPort(node.Address, strconv.Itoa(etcdPeerPort))
	cluster, err := addLearner(ctx, cli, node.Name, peerURL)
	if err != nil {
		return err
	}
	log("%s: etcd member added as a learner, initial cluster %s", node.Name, cluster)
	data, err := n.renderEtcd(ctx, node, configFile)
	if err != nil {
		return err
	}
	if data, err = joinManifest(data, cluster); err != nil {
		return err
	}
	if err := installEtcd(node, data); err != nil {
		return err
	}
	if err := promoteLearner(ctx, cli, peerURL); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(node.Root, "logs", "etcd.log"))
	}
	log("%s: etcd learner promoted", node.Name)
	return waitEtcdQuorum(ctx, cli, append(endpoints, node.Etcd.ClientURL))
}

// etcdCerts are the etcd CA and healthcheck-client pair of the node at root.
func etcdCerts(root string) *EtcdMember {
	dir := filepath.Join(root, "etc", "kubernetes", "pki", "etcd")
	return &EtcdMember{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "healthcheck-client.crt"),
		KeyFile: filepath.Join(dir, "healthcheck-client.key")}
}

// renderEtcd returns the manifest `kubeadm init phase etcd local` renders
// for the node, with its patches, into a private directory.
func (n *Nodes) renderEtcd(ctx context.Context, node *Node, configFile string) ([]byte, error) {
	dir, err := os.MkdirTemp(node.Root, "kubeadm-etcd-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, n.Release.Kubeadm, "init", "phase", "etcd", "local", "--config", configFile, "--dry-run")
	cmd.Env = append(os.Environ(), "KUBEADM_INIT_DRYRUN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kubeadm init phase etcd local: %w: %s", err, out)
	}
	return os.ReadFile(filepath.Join(dir, "etcd.yaml"))
}

// installEtcd creates the member's data directory, as kubeadm does, and
// puts the manifest in place at once: the runner may be scanning.
func installEtcd(node *Node, manifest []byte) error {
	tmp := filepath.Join(node.ManifestsDir, ".etcd.yaml.tmp")
	if err := os.WriteFile(tmp, manifest, 0o600); err != nil {
		return err
	}
	member, err := ReadEtcdMember(node.Root, tmp)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(member.DataDir, 0o700); err != nil {
		return err
	}
	node.Etcd = member
	return os.Rename(tmp, filepath.Join(node.ManifestsDir, "etcd.yaml"))
}

// addLearner adds a learner with peerURL, or finds it added, and returns
// --initial-cluster as kubeadm writes it from the answer.
func addLearner(ctx context.Context, cli *clientv3.Client, name, peerURL string) (string, error) {
	for {
		members, err := tryAddLearner(ctx, cli, peerURL)
		if err == nil {
			return initialCluster(members, name, peerURL), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("add etcd member %s as a learner: %w", peerURL, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func tryAddLearner(ctx context.Context, cli *clientv3.Client, peerURL string) ([]*etcdserverpb.Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range list.Members {
		if len(m.PeerURLs) > 0 && m.PeerURLs[0] == peerURL {
			return list.Members, nil
		}
	}
	resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return nil, err
	}
	return resp.Members, nil
}

// initialCluster is --initial-cluster as kubeadm join writes it: every
// member in the order etcd listed them, the new one by its node name.
func initialCluster(members []*etcdserverpb.Member, name, peerURL string) string {
	var out []string
	for _, m := range members {
		if len(m.PeerURLs) == 0 {
			continue
		}
		n := m.Name
		switch {
		case m.PeerURLs[0] == peerURL:
			n = name
		case n == "":
			n = strconv.FormatUint(m.ID, 16)
		}
		out = append(out, n+"="+m.PeerURLs[0])
	}
	return strings.Join(out, ",")
}

// promoteLearner waits for the learner with peerURL to start (a member
// gets its name when it starts) and promotes it.
func promoteLearner(ctx context.Context, cli *clientv3.Client, peerURL string) error {
	var last error
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		list, err := cli.MemberList(lctx)
		cancel()
		var member *etcdserverpb.Member
		if err == nil {
			for _, m := range list.Members {
				if len(m.PeerURLs) > 0 && m.PeerURLs[0] == peerURL {
					member = m
				}
			}
		}
		switch {
		case err != nil:
			last = err
		case member == nil:
			return fmt.Errorf("etcd member %s is not in the member list", peerURL)
		case !member.IsLearner:
			return nil
		case member.Name == "":
			last = fmt.Errorf("the learner %s has not started", peerURL)
		default:
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := cli.MemberPromote(pctx, member.ID)
			cancel()
			if err == nil {
				return nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promote etcd learner %s: %w", peerURL, last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// joinManifest turns the manifest `kubeadm init phase etcd local` rendered
// for a node into the one `kubeadm join` writes for it: the same but for
// --initial-cluster, which names the members, and
// --initial-cluster-state=existing, which kubeadm's sorted arguments put
// right after it. The node's patches, which kubeadm applies after building
// the arguments, apply alike to both.
func joinManifest(rendered []byte, cluster string) ([]byte, error) {
	lines := bytes.SplitAfter(rendered, []byte("\n"))
	var out [][]byte
	found := 0
	for _, line := range lines {
		item := strings.TrimLeft(string(line), " ")
		indent := string(line[:len(line)-len(item)])
		switch {
		case strings.HasPrefix(item, "- --initial-cluster-state="):
			return nil, errors.New("the rendered etcd manifest has --initial-cluster-state already")
		case strings.HasPrefix(item, "- --initial-cluster="):
			found++
			for _, arg := range []string{"--initial-cluster=" + cluster, "--initial-cluster-state=existing"} {
				// The emitter kubeadm writes with decides the quoting.
				y, err := yaml.Marshal([]string{arg})
				if err != nil {
					return nil, err
				}
				out = append(out, []byte(indent+string(y)))
			}
		default:
			out = append(out, line)
		}
	}
	if found != 1 {
		return nil, fmt.Errorf("the rendered etcd manifest has %d --initial-cluster arguments, not 1", found)
	}
	return bytes.Join(out, nil), nil
}
