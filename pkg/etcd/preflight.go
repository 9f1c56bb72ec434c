package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// PreflightOptions are what a change to the local member is checked
// against.
type PreflightOptions struct {
	// Nodes are the control-plane nodes' names. kubeadm names each member
	// after its node, so the member list must be exactly these: a member
	// of a node that is gone still counts towards quorum, and a node
	// without a member is one whose etcd is not what it seems.
	Nodes []string
	// AllowQuorumLoss lets the change go on when the cluster is too small
	// to keep quorum without this member (one or two voting members) and
	// everything else holds: etcd, and so the API, is then unavailable
	// until the member is back. It is the only way to change the member of
	// a single control-plane node; it never excuses an unhealthy member.
	AllowQuorumLoss bool
}

// Preflight reads the cluster and checks that the local member may be
// changed now (see CheckPreflight). It returns the cluster as it was
// checked: its LocalMember is what WaitBack waits for afterwards. A
// refusal carries exit code 4 and names every member in the way.
func (c *Client) Preflight(ctx context.Context, opts PreflightOptions) (*Cluster, error) {
	cl, err := c.Cluster(ctx)
	if err != nil {
		return nil, exitcode.New(exitcode.Conflict, fmt.Errorf("refusing to change the etcd member of this node: %w", err))
	}
	if err := CheckPreflight(cl, opts); err != nil {
		return cl, err
	}
	return cl, nil
}

// CheckPreflight judges a cluster read by Client.Cluster: every member
// answers healthy, no alarm is raised (nor unknown), the member list is
// the control-plane nodes, and quorum survives the local member being
// down. It is pure, so a caller with a Cluster in hand (a rollout showing
// why it waits) judges it the same way. The error is a *RefusedError with
// exit code 4.
func CheckPreflight(cl *Cluster, opts PreflightOptions) error {
	ref := &RefusedError{Member: fmt.Sprintf("%x", cl.Local), Alarms: cl.Alarms, AlarmsErr: cl.AlarmsErr}
	if local, ok := cl.LocalMember(); ok {
		ref.Member = local.Name
	} else {
		ref.NotListed = true
	}
	for _, m := range cl.Members {
		if !m.Healthy() {
			ref.Unhealthy = append(ref.Unhealthy, m)
		}
	}
	ref.NotNodes, ref.NoMember = MatchNodes(cl.Members, opts.Nodes)
	voters, healthyOthers := 0, 0
	for _, m := range cl.Members {
		if m.Learner {
			continue
		}
		voters++
		if m.ID != cl.Local && m.Healthy() {
			healthyOthers++
		}
	}
	if healthyOthers < Quorum(voters) && (!opts.AllowQuorumLoss || !ref.empty()) {
		ref.Quorum = &QuorumShortfall{Voters: voters, HealthyOthers: healthyOthers}
	}
	if ref.empty() && ref.Quorum == nil {
		return nil
	}
	return exitcode.New(exitcode.Conflict, ref)
}

// Quorum is how many voting members of a cluster of voters must be up for
// it to accept writes: a majority.
func Quorum(voters int) int { return voters/2 + 1 }

// MatchNodes compares the member list with the control-plane nodes:
// members named after no node (an unstarted member has no name), and nodes
// no member is named after.
func MatchNodes(members []Member, nodes []string) (notNodes []Member, noMember []string) {
	names := map[string]bool{}
	for _, m := range members {
		if m.Name == "" || !slices.Contains(nodes, m.Name) {
			notNodes = append(notNodes, m)
		}
		names[m.Name] = true
	}
	for _, n := range nodes {
		if !names[n] && !slices.Contains(noMember, n) {
			noMember = append(noMember, n)
		}
	}
	slices.Sort(noMember)
	return notNodes, noMember
}

// QuorumShortfall is a cluster that would lose quorum with the local
// member down.
type QuorumShortfall struct {
	Voters        int
	HealthyOthers int
}

// RefusedError is a change to the local member refused before anything was
// done, with every reason found. Each member in it is named by name, ID
// and endpoint.
type RefusedError struct {
	// Member names the local member, the one that was to be changed.
	Member    string
	Unhealthy []Member
	Alarms    []Alarm
	// AlarmsErr says why the alarms are not known.
	AlarmsErr string
	// NotListed is a local member missing from the member list.
	NotListed bool
	// NotNodes are members no control-plane node is named after;
	// NoMember, control-plane nodes without a member.
	NotNodes []Member
	NoMember []string
	// Quorum is set when quorum would not survive the member being down.
	Quorum *QuorumShortfall
}

func (e *RefusedError) empty() bool {
	return len(e.Unhealthy) == 0 && len(e.Alarms) == 0 && e.AlarmsErr == "" && !e.NotListed && len(e.NotNodes) == 0 && len(e.NoMember) == 0
}

func (e *RefusedError) Error() string {
	var why []string
	for _, m := range e.Unhealthy {
		why = append(why, fmt.Sprintf("%s is unhealthy: %s (bring it back first)", m, m.Problem))
	}
	for _, a := range e.Alarms {
		why = append(why, fmt.Sprintf("etcd %s is raised (resolve it, then etcdctl alarm disarm)", a))
	}
	if e.AlarmsErr != "" {
		why = append(why, "the alarms cannot be listed: "+e.AlarmsErr)
	}
	if e.NotListed {
		why = append(why, "it is not in the member list (removed from the cluster?)")
	}
	for _, m := range e.NotNodes {
		why = append(why, fmt.Sprintf("%s is no control-plane node's (remove it with etcdctl member remove if its node is gone)", m))
	}
	for _, n := range e.NoMember {
		why = append(why, fmt.Sprintf("control-plane node %s has no etcd member", n))
	}
	if q := e.Quorum; q != nil {
		s := fmt.Sprintf("with it down, %d of %d voting members would be healthy, and quorum needs %d", q.HealthyOthers, q.Voters, Quorum(q.Voters))
		if q.Voters < 3 {
			s += " (a cluster of fewer than 3 cannot restart a member without downtime)"
		}
		why = append(why, s)
	}
	return fmt.Sprintf("refusing to change etcd member %s: %s", e.Member, strings.Join(why, "; "))
}
