package etcd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func TestQuorum(t *testing.T) {
	// How many of the others must be healthy for a member to go down.
	for voters, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4} {
		if got := Quorum(voters); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", voters, got, want)
		}
	}
}

// member is a healthy voting member named cp-N with ID N+1.
func member(i int) Member {
	url := fmt.Sprintf("https://127.0.0.1:%d", 2379+i)
	return Member{ID: uint64(i + 1), Name: fmt.Sprintf("cp-%d", i), ClientURLs: []string{url}, Endpoint: url,
		Status: &Status{Leader: 1, RaftIndex: 100, RaftAppliedIndex: 100}}
}

// cluster is n healthy members, the local one cp-local, changed by edit.
func cluster(n, local int, edit func(*Cluster)) *Cluster {
	cl := &Cluster{ID: 99, Local: uint64(local + 1)}
	for i := range n {
		cl.Members = append(cl.Members, member(i))
	}
	if edit != nil {
		edit(cl)
	}
	return cl
}

func nodes(n int) []string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("cp-%d", i))
	}
	return names
}

func TestCheckPreflight(t *testing.T) {
	down := func(i int) func(*Cluster) {
		return func(cl *Cluster) {
			cl.Members[i].Status, cl.Members[i].Problem = nil, "it does not answer: connection refused"
		}
	}
	for _, tc := range []struct {
		name  string
		cl    *Cluster
		nodes []string
		allow bool
		want  string // "" when the change may go on
	}{
		{"three healthy", cluster(3, 1, nil), nodes(3), false, ""},
		{"five healthy", cluster(5, 0, nil), nodes(5), false, ""},
		{"one down of three", cluster(3, 1, down(2)), nodes(3), false,
			"refusing to change etcd member cp-1: etcd member cp-2 (ID 3, https://127.0.0.1:2381) is unhealthy: it does not answer: connection refused (bring it back first); " +
				"with it down, 1 of 3 voting members would be healthy, and quorum needs 2"},
		// Quorum would survive, but every member must be healthy, as the
		// issue asks: a second member down is one failure from an outage.
		{"one down of five", cluster(5, 0, down(4)), nodes(5), false,
			"refusing to change etcd member cp-0: etcd member cp-4 (ID 5, https://127.0.0.1:2383) is unhealthy: it does not answer: connection refused (bring it back first)"},
		{"the local member down", cluster(3, 1, down(1)), nodes(3), false,
			"refusing to change etcd member cp-1: etcd member cp-1 (ID 2, https://127.0.0.1:2380) is unhealthy: it does not answer: connection refused (bring it back first)"},
		{"single member", cluster(1, 0, nil), nodes(1), false,
			"refusing to change etcd member cp-0: with it down, 0 of 1 voting members would be healthy, and quorum needs 1 (a cluster of fewer than 3 cannot restart a member without downtime)"},
		{"single member, downtime allowed", cluster(1, 0, nil), nodes(1), true, ""},
		{"two members", cluster(2, 0, nil), nodes(2), false,
			"refusing to change etcd member cp-0: with it down, 1 of 2 voting members would be healthy, and quorum needs 2 (a cluster of fewer than 3 cannot restart a member without downtime)"},
		{"two members, downtime allowed", cluster(2, 0, nil), nodes(2), true, ""},
		// Allowing downtime never excuses anything else.
		{"two members, one down, downtime allowed", cluster(2, 0, down(1)), nodes(2), true,
			"refusing to change etcd member cp-0: etcd member cp-1 (ID 2, https://127.0.0.1:2380) is unhealthy: it does not answer: connection refused (bring it back first); " +
				"with it down, 0 of 2 voting members would be healthy, and quorum needs 2 (a cluster of fewer than 3 cannot restart a member without downtime)"},
		{"alarm", cluster(3, 1, func(cl *Cluster) { cl.Alarms = []Alarm{{MemberID: 3, Member: "cp-2", Type: "NOSPACE"}} }), nodes(3), true,
			"refusing to change etcd member cp-1: etcd alarm NOSPACE on member cp-2 (ID 3) is raised (resolve it, then etcdctl alarm disarm)"},
		{"alarms unknown", cluster(3, 1, func(cl *Cluster) { cl.AlarmsErr = "context deadline exceeded" }), nodes(3), false,
			"refusing to change etcd member cp-1: the alarms cannot be listed: context deadline exceeded"},
		{"a member of a node that is gone", cluster(3, 1, nil), []string{"cp-0", "cp-1"}, false,
			"refusing to change etcd member cp-1: etcd member cp-2 (ID 3, https://127.0.0.1:2381) is no control-plane node's (remove it with etcdctl member remove if its node is gone)"},
		{"a node without a member", cluster(2, 1, nil), nodes(3), true,
			"refusing to change etcd member cp-1: control-plane node cp-2 has no etcd member; " +
				"with it down, 1 of 2 voting members would be healthy, and quorum needs 2 (a cluster of fewer than 3 cannot restart a member without downtime)"},
		{"an unstarted member", cluster(3, 1, func(cl *Cluster) {
			cl.Members = append(cl.Members, Member{ID: 0xab, PeerURLs: []string{"https://10.0.0.4:2380"}, Problem: "it has not started"})
		}), nodes(3), false,
			"refusing to change etcd member cp-1: unstarted etcd member ab (peer https://10.0.0.4:2380) is unhealthy: it has not started (bring it back first); " +
				"unstarted etcd member ab (peer https://10.0.0.4:2380) is no control-plane node's (remove it with etcdctl member remove if its node is gone); " +
				// It counts towards quorum all the same: the danger of a stale member.
				"with it down, 2 of 4 voting members would be healthy, and quorum needs 3"},
		{"a learner", cluster(3, 1, func(cl *Cluster) {
			cl.Members[2].Learner, cl.Members[2].Problem = true, "it is a learner, not a voting member yet (a join in progress?)"
		}), nodes(3), false,
			"refusing to change etcd member cp-1: etcd member cp-2 (ID 3, https://127.0.0.1:2381) is unhealthy: it is a learner, not a voting member yet (a join in progress?) (bring it back first); " +
				"with it down, 1 of 2 voting members would be healthy, and quorum needs 2 (a cluster of fewer than 3 cannot restart a member without downtime)"},
		{"the local member not listed", cluster(3, 7, nil), nodes(3), false,
			"refusing to change etcd member 8: it is not in the member list (removed from the cluster?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPreflight(tc.cl, PreflightOptions{Nodes: tc.nodes, AllowQuorumLoss: tc.allow})
			got := ""
			if err != nil {
				got = err.Error()
				var ref *RefusedError
				if !errors.As(err, &ref) || exitcode.FromError(err) != exitcode.Conflict {
					t.Errorf("want a *RefusedError with exit code 4, got %T %d", err, exitcode.FromError(err))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchNodes(t *testing.T) {
	members := []Member{member(0), member(1), {ID: 9, PeerURLs: []string{"https://10.0.0.9:2380"}}, member(3)}
	notNodes, noMember := MatchNodes(members, []string{"cp-3", "cp-1", "cp-0", "cp-2", "cp-2"})
	var names []string
	for _, m := range notNodes {
		names = append(names, fmt.Sprintf("%x/%s", m.ID, m.Name))
	}
	if diff := cmp.Diff([]string{"9/"}, names); diff != "" {
		t.Errorf("members of no node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"cp-2"}, noMember); diff != "" {
		t.Errorf("nodes without a member (-want +got):\n%s", diff)
	}
}

func TestCheckBack(t *testing.T) {
	before := member(1)
	for _, tc := range []struct {
		name string
		edit func(*Cluster)
		want string
	}{
		{"back and caught up", nil, ""},
		{"within the lag", func(cl *Cluster) { cl.Members[0].Status.RaftIndex = 1100 }, ""},
		{"behind the leader", func(cl *Cluster) { cl.Members[0].Status.RaftIndex = 1101 },
			"etcd member cp-1 (ID 2, https://127.0.0.1:2380) has applied raft index 100, 1001 behind the leader's 1101 (at most 1000 allowed)"},
		{"ahead of a leader that answered earlier", func(cl *Cluster) { cl.Members[1].Status.RaftAppliedIndex = 150 }, ""},
		{"another ID on its endpoints", func(cl *Cluster) { cl.Local, cl.Members[1].ID = 7, 7 },
			"this node's endpoints answer as member 7, not 2 (was its data directory replaced?)"},
		{"not started", func(cl *Cluster) { cl.Members[1].Name = "" },
			"member 2 has not started (the member list has no name or client URL for it)"},
		{"a learner", func(cl *Cluster) { cl.Members[1].Learner = true }, "etcd member cp-1 (ID 2, https://127.0.0.1:2380) is a learner"},
		{"another member unhealthy", func(cl *Cluster) { cl.Members[2].Problem = "it has no leader" },
			"etcd member cp-2 (ID 3, https://127.0.0.1:2381) is unhealthy: it has no leader"},
		{"an alarm", func(cl *Cluster) { cl.Alarms = []Alarm{{MemberID: 2, Member: "cp-1", Type: "CORRUPT"}} },
			"etcd alarm CORRUPT on member cp-1 (ID 2) is raised"},
		{"no leader answered", func(cl *Cluster) { cl.Members[1].Status.Leader = 9 },
			"etcd member cp-1 (ID 2, https://127.0.0.1:2380) follows leader 9, which did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckBack(cluster(3, 1, tc.edit), before, DefaultMaxLag)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
