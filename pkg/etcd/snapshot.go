package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// SnapshotOptions say what a snapshot is filed under and how many are kept.
type SnapshotOptions struct {
	// Node is the node whose local member is snapshotted.
	Node string
	// Reason is recorded with it (backup.ReasonBeforeEtcdChange when
	// empty).
	Reason string
	// Keep is how many snapshots of this node's member are kept after it
	// is written (backup.DefaultKeepEtcdSnapshots when zero).
	Keep int
}

// snapshotHeadroom is what a snapshot may have grown by since the member
// reported its database size: etcd's snapshot is the database as the
// stream starts plus a 32-byte sha256, so only what was written in between
// can make it larger. A quarter more, and 64 MiB, is far beyond that, and
// far below a full disk.
func snapshotHeadroom(dbSize int64) int64 { return dbSize/4 + 64<<20 }

// Snapshot streams a snapshot of the local member (Maintenance.Snapshot)
// into store, then prunes this node's older snapshots beyond Keep. The
// stream may take as long as the database needs, but fails as soon as it
// stalls for the client's timeout; it is bounded by the size the member
// reports for its database (see snapshotHeadroom), and refused when it
// would fill the backup directory's disk.
func (c *Client) Snapshot(ctx context.Context, store *backup.Store, opts SnapshotOptions) (*backup.EtcdSnapshot, error) {
	if opts.Reason == "" {
		opts.Reason = backup.ReasonBeforeEtcdChange
	}
	if opts.Keep <= 0 {
		opts.Keep = backup.DefaultKeepEtcdSnapshots
	}
	ep, st, err := c.localStatus(ctx)
	if err != nil {
		return nil, exitcode.New(exitcode.Conflict, fmt.Errorf("cannot snapshot etcd: %w", err))
	}
	id := st.Header.MemberId
	meta := backup.EtcdSnapshotMeta{
		Node: opts.Node, MemberID: fmt.Sprintf("%016x", id), ClusterID: fmt.Sprintf("%016x", st.Header.ClusterId),
		Revision: st.Header.Revision, EtcdVersion: st.Version, Reason: opts.Reason,
	}
	if list, err := c.memberList(ctx); err == nil {
		for _, m := range list.Members {
			if m.ID == id {
				meta.Member = m.Name
			}
		}
	}
	// Through the endpoint that just answered as the member, alone: a
	// snapshot is of the member that sends it, and its stream says not
	// which.
	cli, err := c.member(ep)
	if err != nil {
		return nil, err
	}
	var snap *backup.EtcdSnapshot
	err = watched(ctx, c.timeout, func(ctx context.Context) (io.ReadCloser, error) {
		resp, err := cli.SnapshotWithVersion(ctx)
		if err != nil {
			return nil, err
		}
		return resp.Snapshot, nil
	}, func(r io.Reader) (err error) {
		snap, err = store.WriteEtcdSnapshot(r, meta, st.DbSize+snapshotHeadroom(st.DbSize))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("etcd snapshot of member %x: %w", id, err)
	}
	_, _ = store.PruneNodeEtcdSnapshots(opts.Keep, meta.ClusterID, meta.Node) // housekeeping: 'backup prune' reports its errors
	return snap, nil
}

// watched opens a stream and hands it to consume, and lets it last as long
// as it needs but never stall: when no byte has come for idle, its start
// included, the stream's context is cancelled and the error says so.
func watched(ctx context.Context, idle time.Duration, open func(context.Context) (io.ReadCloser, error), consume func(io.Reader) error) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(idle, func() { cancel(errStalled) })
	defer watchdog.Stop()
	err := func() error {
		rc, err := open(sctx)
		if err != nil {
			return err
		}
		defer rc.Close()
		return consume(&idleReader{r: rc, idle: idle, timer: watchdog})
	}()
	if err != nil && errors.Is(context.Cause(sctx), errStalled) {
		return exitcode.Failuref("no data for %s: %w; nothing was kept", idle, errStalled)
	}
	return err
}

var errStalled = errors.New("the stream stalled")

// idleReader pushes timer back by idle whenever bytes come through it.
type idleReader struct {
	r     io.Reader
	idle  time.Duration
	timer *time.Timer
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.timer.Reset(i.idle)
	}
	return n, err
}
