package testcluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The output of a test whose last step failed, as go test -v prints it
// (cut from a failed TestEtcdReconfigure): the step's own lines and the
// FAIL lines come out; the cluster's setup, another step's figures and the
// continuation lines of an agent's log do not.
func TestFailureLines(t *testing.T) {
	output := strings.Split(`=== RUN   TestEtcdReconfigure
    nodes.go:358: cp-0: certificates and kubeconfigs with kubeadm
=== RUN   TestEtcdReconfigure/a_flag_etcd_refuses
    etcd_steps_test.go:294: etcd: 109 looks: at least 2 members up
=== RUN   TestEtcdReconfigure/a_rollout
=== NAME  TestEtcdReconfigure
    staticpods.go:292: cp-0: etcd.yaml changed (config hash 71540874 -> cf54d8f), restarting
=== NAME  TestEtcdReconfigure/a_rollout
    etcd_agents_test.go:37: rollout of an etcd flag over three members took 47.4s
    etcd_agents_test.go:43: cp-2's member was never seen down
    etcd_agents_test.go:106: agent of cp-2 logged:
        2026-12-02T16:37:12Z info AgentStarted: agent agent/cp-2 is running
        2026-12-02T16:37:15Z info NodeState: node cp-2 is out of sync
=== NAME  TestEtcdReconfigure
    process_test.go:28: files and logs kept in /tmp/kept
--- FAIL: TestEtcdReconfigure (237.51s)
    --- PASS: TestEtcdReconfigure/a_flag_etcd_refuses (10.00s)
    --- FAIL: TestEtcdReconfigure/a_rollout (63.95s)
FAIL`, "\n")
	want := []string{
		"    etcd_agents_test.go:37: rollout of an etcd flag over three members took 47.4s",
		"    etcd_agents_test.go:43: cp-2's member was never seen down",
		"    etcd_agents_test.go:106: agent of cp-2 logged:",
		"--- FAIL: TestEtcdReconfigure (237.51s)",
		"    --- FAIL: TestEtcdReconfigure/a_rollout (63.95s)",
	}
	if diff := cmp.Diff(want, FailureLines(output, 40)); diff != "" {
		t.Errorf("FailureLines (-want +got):\n%s", diff)
	}
	if got := FailureLines(output, 2); len(got) != 2 {
		t.Errorf("FailureLines with max 2 gave %d lines", len(got))
	}
	// A test without subtests: its own lines.
	single := []string{"=== RUN   TestX", "    x_test.go:1: setup", "    x_test.go:2: boom", "--- FAIL: TestX (1.00s)"}
	if diff := cmp.Diff(single[1:], FailureLines(single, 40)); diff != "" {
		t.Errorf("FailureLines of a test without subtests (-want +got):\n%s", diff)
	}
}
