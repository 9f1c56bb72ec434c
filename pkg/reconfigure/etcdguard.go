package reconfigure

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// etcdGuard keeps a change of the node's etcd member from costing the
// cluster its quorum, in pkg/etcd's order: before anything on the node
// changes, it takes the cluster-wide etcd lock, checks the cluster
// (etcd.Preflight, against the control-plane nodes) and takes a snapshot;
// right before the member's manifest is replaced it checks again (Before);
// once the member runs a manifest, new or put back, it waits until the
// member is back in its cluster and this node's API server is ready
// (Ready); and it lets the lock go when the run ends.
type etcdGuard struct {
	r      *run
	node   string
	client *etcd.Client
	lock   *engine.HeldLease
	opts   etcd.PreflightOptions
	member etcd.Member // as the last check saw it
}

// guardEtcd prepares the change of the node's member: everything up to
// the snapshot. An error is a StageError at StageEtcd, and nothing was
// changed; the guard is released.
func (r *run) guardEtcd(ctx context.Context, src *source, node string, running *controlplane.Manifest, rep *EtcdReport) (g *etcdGuard, err error) {
	g = &etcdGuard{r: r, node: node}
	defer func() {
		if err != nil {
			g.release()
			err = &StageError{Stage: StageEtcd, Err: err}
		}
	}()
	if g.client, err = r.etcdClient(src.doc.CertificatesDir(), running); err != nil {
		return g, err
	}
	r.emitEtcd("taking lease %s/%s: one etcd member of the cluster is changed at a time", r.node.Config.Target().Namespace, EtcdLockLease)
	if g.lock, err = lockEtcd(ctx, r.node.Config, node, r.identity(), r.node.Now, 0); err != nil {
		return g, err
	}
	if g.opts.Nodes, err = r.node.Config.ControlPlaneNodes(ctx); err != nil {
		return g, err
	}
	if err := g.check(ctx); err != nil {
		return g, err
	}
	rep.Member = g.member.String()
	if r.req.NoEtcdSnapshot {
		r.emitEtcd("no snapshot of %s, as asked", g.member)
		return g, nil
	}
	snap, err := g.client.Snapshot(ctx, r.node.Store, etcd.SnapshotOptions{Node: node})
	if err != nil {
		return g, exitcode.New(exitcode.FromError(err), &EtcdSnapshotError{Member: g.member.String(), Err: err})
	}
	rep.Snapshot = snap.Name
	r.emitEtcd("snapshot of %s at revision %d: %s (%d bytes)", g.member, snap.Revision, snap.Name, snap.Size)
	return g, nil
}

// guardPutBack prepares the put-back of the node's member on a manifest it
// ran before: the client and the lock, waited for while another member is
// changed (up to Wait), but no checks and no snapshot: the member may be
// down, and the manifest is one it ran.
func (r *run) guardPutBack(ctx context.Context, running *controlplane.Manifest) (g *etcdGuard, err error) {
	g = &etcdGuard{r: r, node: r.node.Name}
	defer func() {
		if err != nil {
			g.release()
			err = &StageError{Stage: StageEtcd, Err: err}
		}
	}()
	if g.client, err = r.etcdClient("", running); err != nil {
		return g, err
	}
	r.emitEtcd("taking lease %s/%s to put the etcd member of node %s back", r.node.Config.Target().Namespace, EtcdLockLease, g.node)
	g.lock, err = lockEtcd(ctx, r.node.Config, g.node, r.identity(), r.node.Now, r.req.Wait)
	return g, err
}

// etcdClient is a client of the node's member, reached on the endpoints of
// its running manifest with kubeadm's etcd client certificate from
// CertificatesDir, else docDir (the ClusterConfiguration's), else
// kubeadm's default.
func (r *run) etcdClient(docDir string, running *controlplane.Manifest) (*etcd.Client, error) {
	certs := r.node.CertificatesDir
	if certs == "" {
		certs = docDir
	}
	if certs == "" {
		certs = etcd.DefaultCertificatesDir
	}
	creds, err := etcd.FindCredentials(certs)
	if err != nil {
		return nil, exitcode.New(exitcode.FromError(err), &EtcdCredentialsError{Dir: certs, Err: err})
	}
	endpoints, err := etcd.ParseEndpoints(running.Raw)
	if err != nil {
		return nil, exitcode.Invalidf("the running etcd manifest: %w", err)
	}
	client, err := etcd.New(etcd.Config{Endpoints: endpoints, Credentials: creds})
	if err != nil {
		return nil, exitcode.New(exitcode.Failure, err)
	}
	return client, nil
}

// check runs the preflight and keeps the member it saw.
func (g *etcdGuard) check(ctx context.Context) error {
	cl, err := g.client.Preflight(ctx, g.opts)
	if err != nil {
		return err
	}
	g.member, _ = cl.LocalMember()
	g.r.emitEtcd("%d members healthy, no alarm, one per control-plane node (%v): %s may be changed", len(cl.Members), g.opts.Nodes, g.member)
	return nil
}

// before is controlplane.Options.Before: right before the member's
// manifest is replaced, the lock must still be this run's and the cluster
// must pass the preflight again (the other components' restarts took
// time).
func (g *etcdGuard) before(ctx context.Context, c controlplane.Component) error {
	if c != controlplane.Etcd {
		return nil
	}
	if err := g.confirm(ctx, c); err != nil {
		return err
	}
	return g.check(ctx)
}

// confirm is controlplane.Options.Before of a put-back, and the first
// check of before: right before the member's manifest is replaced, this
// run must show that it still holds the etcd lock, by a renewal written
// just now. A holder whose renewals have been failing (its API server
// restarting, say) may have been taken over by another node's change,
// which may be restarting its own member: two members down at once would
// cost a 3-member cluster its quorum.
func (g *etcdGuard) confirm(ctx context.Context, c controlplane.Component) error {
	if c != controlplane.Etcd {
		return nil
	}
	if err := g.lock.Confirm(ctx); err != nil {
		return exitcode.Conflictf("the etcd lock is not surely this run's any more, so %s was not changed: %w", g.memberName(), err)
	}
	return nil
}

// memberName names the member for a message: as the checks saw it, or
// after its node.
func (g *etcdGuard) memberName() string {
	if g.member.ID != 0 {
		return g.member.String()
	}
	return "the etcd member of node " + g.node
}

// ready is controlplane.Options.Ready: once the member runs a manifest
// (the new one, or its previous one put back), it is back when its
// cluster says so (etcd.CheckBack: the same member ID, started, caught up
// with the leader, every member healthy), and then this node's API server
// must answer /readyz, which it does only with its storage.
func (g *etcdGuard) ready(ctx context.Context, c controlplane.Component) error {
	if c != controlplane.Etcd {
		return nil
	}
	wait := g.r.req.Wait
	deadline := time.Now().Add(wait)
	if err := g.waitBack(ctx, wait); err != nil {
		return err
	}
	g.r.emitEtcd("%s is back", g.member)
	return waitReadyz(ctx, filepath.Join(g.r.node.ManifestsDir, controlplane.APIServer.File()), deadline, g.r.emitEtcd)
}

// waitBack waits until the member is back (etcd.CheckBack): the member
// the checks saw, or for a put-back, which has no checks, the member named
// after the node.
func (g *etcdGuard) waitBack(ctx context.Context, wait time.Duration) error {
	if g.member.ID != 0 {
		g.r.emitEtcd("waiting up to %s for %s to be back: the same member ID, caught up with the leader, every member healthy", wait, g.member)
		_, err := g.client.WaitBack(ctx, g.member, etcd.WaitOptions{Wait: wait})
		return err
	}
	g.r.emitEtcd("waiting up to %s for the etcd member of node %s to be back: caught up with the leader, every member healthy", wait, g.node)
	deadline := time.Now().Add(wait)
	for {
		var last string
		cl, err := g.client.Cluster(ctx)
		if err != nil {
			last = err.Error()
		} else if i := slices.IndexFunc(cl.Members, func(m etcd.Member) bool { return m.Name == g.node }); i < 0 {
			last = "no member of the cluster is named after node " + g.node
		} else if last = etcd.CheckBack(cl, cl.Members[i], etcd.DefaultMaxLag); last == "" {
			g.member = cl.Members[i]
			return nil
		}
		if !time.Now().Add(etcd.DefaultInterval).Before(deadline) {
			return &etcd.NotBackError{Member: etcd.Member{Name: g.node}, Wait: wait, Last: last}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for the etcd member of node %s: %w", g.node, ctx.Err())
		case <-time.After(etcd.DefaultInterval):
		}
	}
}

// release lets the lock go and closes the client.
func (g *etcdGuard) release() {
	if g.lock != nil {
		if err := g.lock.Stop(); err != nil {
			g.r.emit(Event{Kind: EventWarning, Message: fmt.Sprintf("the etcd lock was not let go (it goes stale within %s): %s", etcdLockDuration, exitcode.Message(err))})
		}
		g.lock = nil
	}
	if g.client != nil {
		_ = g.client.Close()
		g.client = nil
	}
}

// waitReadyz waits until the API server of the manifest at path answers
// its readiness probe (/readyz), until deadline.
func waitReadyz(ctx context.Context, path string, deadline time.Time, emit func(string, ...any)) error {
	m, err := controlplane.ReadManifest(path)
	if err != nil {
		return fmt.Errorf("cannot tell whether this node's API server is ready: %w", err)
	}
	probe, err := m.ReadinessProbe()
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The kubelet does not verify a probed component's certificate either.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // health probe, as the kubelet's
	defer client.CloseIdleConnections()
	emit("waiting for this node's API server to answer %s", probe.URL())
	for {
		err := probe.Check(ctx, client)
		if err == nil {
			emit("this node's API server answers %s", probe.URL())
			return nil
		}
		if !time.Now().Add(time.Second).Before(deadline) {
			return fmt.Errorf("this node's API server does not answer %s: %w", probe.URL(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s: %w", probe.URL(), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// identity names this run as the holder of the etcd lock.
func (r *run) identity() string {
	if r.node.Identity != "" {
		return r.node.Identity
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("reconfigure/%s/%d-%s", r.node.Name, os.Getpid(), hex.EncodeToString(b[:]))
}

// emitEtcd reports a step of the etcd change.
func (r *run) emitEtcd(format string, args ...any) {
	r.emit(Event{Kind: EventEtcd, Message: fmt.Sprintf(format, args...)})
}
