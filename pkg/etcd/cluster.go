package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
)

// Cluster is the etcd cluster as seen from the node's local member at one
// moment: its member list, what each member answered, and the alarms.
// Preflight and WaitBack judge it; the rollout can show it.
type Cluster struct {
	// ID is the cluster's ID; Local the ID of the member behind the
	// node's endpoints.
	ID    uint64
	Local uint64
	// Members are the members in the member list's order.
	Members []Member
	// Alarms are the alarms raised; AlarmsErr, when not empty, says why
	// they could not be listed.
	Alarms    []Alarm
	AlarmsErr string
}

// Member is one member of the cluster, as the member list shows it and as
// it answered itself.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
	// Endpoint is the client URL it was asked on.
	Endpoint string
	// Status is what it answered; nil when it did not.
	Status *Status
	// Problem says why the member is not healthy; empty when it is.
	Problem string
}

// Status is what a member says of itself (Maintenance.Status).
type Status struct {
	Version     string
	DBSize      int64
	DBSizeQuota int64
	// Leader is the ID of the member it follows; 0 when it has none.
	Leader uint64
	// RaftIndex is its committed index, RaftAppliedIndex what it applied.
	RaftIndex        uint64
	RaftAppliedIndex uint64
	RaftTerm         uint64
	Revision         int64
	Learner          bool
	// Errors are the errors it reports, its alarms among them.
	Errors []string
}

// Alarm is an alarm raised on a member, such as NOSPACE.
type Alarm struct {
	MemberID uint64
	// Member is the member's name, when the member list has it.
	Member string
	Type   string
}

func (a Alarm) String() string {
	if a.Member == "" {
		return fmt.Sprintf("alarm %s on member %x", a.Type, a.MemberID)
	}
	return fmt.Sprintf("alarm %s on member %s (ID %x)", a.Type, a.Member, a.MemberID)
}

// String names the member as errors do: its name, ID and endpoint.
func (m Member) String() string {
	if m.Name == "" {
		if len(m.PeerURLs) == 0 {
			return fmt.Sprintf("unstarted etcd member %x", m.ID)
		}
		return fmt.Sprintf("unstarted etcd member %x (peer %s)", m.ID, strings.Join(m.PeerURLs, ","))
	}
	ep := m.Endpoint
	if ep == "" && len(m.ClientURLs) > 0 {
		ep = m.ClientURLs[0]
	}
	if ep == "" {
		return fmt.Sprintf("etcd member %s (ID %x)", m.Name, m.ID)
	}
	return fmt.Sprintf("etcd member %s (ID %x, %s)", m.Name, m.ID, ep)
}

// Healthy reports whether the member answered, and answered well.
func (m Member) Healthy() bool { return m.Problem == "" }

// Member returns the member of the given ID.
func (c *Cluster) Member(id uint64) (Member, bool) {
	for _, m := range c.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// LocalMember returns the node's own member.
func (c *Cluster) LocalMember() (Member, bool) { return c.Member(c.Local) }

// Cluster reads the cluster's state through the local member: its status,
// the member list, the alarms, and then every member's own status and a
// linearizable read on each member's own endpoint, all at once, each call
// within the timeout. An error means the local member did not answer at
// all; whatever else fails is recorded in the Cluster, for the checks to
// judge.
func (c *Client) Cluster(ctx context.Context) (*Cluster, error) {
	_, local, err := c.localStatus(ctx)
	if err != nil {
		return nil, err
	}
	cl := &Cluster{ID: local.Header.ClusterId, Local: local.Header.MemberId}
	list, err := c.memberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("the local etcd member %x cannot list the members: %w", cl.Local, err)
	}
	for _, m := range list.Members {
		cl.Members = append(cl.Members, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner})
	}
	checks := make([]<-chan error, len(cl.Members))
	for i := range cl.Members {
		checks[i] = crash.Go(func() error { c.check(ctx, &cl.Members[i]); return nil })
	}
	actx, cancel := c.call(ctx)
	alarms, err := c.local.AlarmList(actx)
	cancel()
	var panics []error // a check's panic: an internal error
	for _, done := range checks {
		if perr := <-done; perr != nil {
			panics = append(panics, perr)
		}
	}
	if len(panics) > 0 {
		return nil, errors.Join(panics...)
	}
	if err != nil {
		cl.AlarmsErr = err.Error()
	} else {
		for _, a := range alarms.Alarms {
			m, _ := cl.Member(a.MemberID)
			cl.Alarms = append(cl.Alarms, Alarm{MemberID: a.MemberID, Member: m.Name, Type: a.Alarm.String()})
		}
	}
	return cl, nil
}

// localStatus asks the local member its status on each of its endpoints in
// turn, and returns the first answer and the endpoint that gave it.
func (c *Client) localStatus(ctx context.Context) (string, *clientv3.StatusResponse, error) {
	var errs []error
	for _, ep := range c.local.Endpoints() {
		cctx, cancel := c.call(ctx)
		st, err := c.local.Status(cctx, ep)
		cancel()
		if err == nil {
			return ep, st, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	return "", nil, &LocalDownError{Endpoints: c.local.Endpoints(), Err: errors.Join(errs...)}
}

// LocalDownError is the node's own member not answering on any of its
// endpoints.
type LocalDownError struct {
	Endpoints []string
	Err       error
}

func (e *LocalDownError) Error() string {
	return fmt.Sprintf("the etcd member of this node does not answer on %s: %v", strings.Join(e.Endpoints, ", "), e.Err)
}

func (e *LocalDownError) Unwrap() error { return e.Err }

// memberList reads the member list linearizably, and serializably when
// that fails (no quorum): then the members that are down can still be
// named.
func (c *Client) memberList(ctx context.Context) (*clientv3.MemberListResponse, error) {
	cctx, cancel := c.call(ctx)
	list, err := c.local.MemberList(cctx)
	cancel()
	if err == nil {
		return list, nil
	}
	cctx, cancel = c.call(ctx)
	defer cancel()
	list, serr := c.local.MemberList(cctx, clientv3.WithSerializable())
	if serr != nil {
		return nil, errors.Join(err, serr)
	}
	return list, nil
}

// check asks a member its status on its own endpoints and reads through it
// linearizably, as `etcdctl endpoint health` does, and records in m what
// is wrong. A member that answers its status can still be cut off from the
// others: only the read tells.
func (c *Client) check(ctx context.Context, m *Member) {
	if len(m.ClientURLs) == 0 {
		m.Problem = "it has not started: it has no client URLs (added to the cluster, but never joined?)"
		return
	}
	var st *pb.StatusResponse
	var errs []string
	for _, ep := range m.ClientURLs {
		cctx, cancel := c.call(ctx)
		resp, err := c.local.Status(cctx, ep)
		cancel()
		if err == nil {
			st, m.Endpoint = (*pb.StatusResponse)(resp), ep
			break
		}
		errs = append(errs, fmt.Sprintf("%s: %v", ep, err))
	}
	if st == nil {
		m.Endpoint = m.ClientURLs[0]
		m.Problem = "it does not answer: " + strings.Join(errs, "; ")
		return
	}
	m.Status = &Status{
		Version: st.Version, DBSize: st.DbSize, DBSizeQuota: st.DbSizeQuota, Leader: st.Leader,
		RaftIndex: st.RaftIndex, RaftAppliedIndex: st.RaftAppliedIndex, RaftTerm: st.RaftTerm,
		Revision: st.Header.GetRevision(), Learner: st.IsLearner, Errors: st.Errors,
	}
	switch {
	case st.Header.GetMemberId() != m.ID:
		m.Problem = fmt.Sprintf("%s answers as member %x, not %x", m.Endpoint, st.Header.GetMemberId(), m.ID)
	case m.Learner || st.IsLearner:
		m.Problem = "it is a learner, not a voting member yet (a join in progress?)"
	case len(memberErrors(st.Errors)) > 0:
		m.Problem = "it reports " + strings.Join(memberErrors(st.Errors), "; ")
	case st.Leader == 0:
		m.Problem = "it has no leader"
	}
	if m.Problem != "" {
		return
	}
	cli, err := c.member(m.Endpoint)
	if err != nil {
		m.Problem = err.Error()
		return
	}
	cctx, cancel := c.call(ctx)
	_, err = cli.Get(cctx, "health")
	cancel()
	if err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) { // as etcdctl: denied is an answer
		m.Problem = "it cannot serve a linearizable read: " + err.Error()
	}
}

// memberErrors are the errors a member reports but the alarms, which every
// member reports alike and the alarm list names once.
func memberErrors(errs []string) []string {
	var out []string
	for _, e := range errs {
		if !strings.Contains(e, "alarm:") {
			out = append(out, e)
		}
	}
	return out
}
