package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The upgrade bench's tables: figures, no targets.

func printUpgrade(u *upgradeRun) {
	fmt.Printf("one upgrade-apply %s --wait from %s on 3 kubeadm control-plane nodes (stacked etcd), carried out by their agents "+
		"(the plugin built as released) with the real kubeadm, phase by phase\n", u.to, u.from)

	fmt.Println("\nper node: its step, from the agent's write that began it to the one that recorded it done (its agent's log, stamped on arrival)")
	fmt.Println()
	fmt.Println("| node | control-plane step | kubeadm runs | sum of kubeadm runs | gate | the rest of the step | kubelet step |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var kubeadm, gates, kubelets time.Duration
	runs := 0
	for _, s := range u.steps {
		if s.kubelet {
			kubelets += s.done.Sub(s.begun)
			continue
		}
		kubeadm += s.kubeadmSum()
		gates += s.gate
		runs += len(s.kubeadm)
		took := s.done.Sub(s.begun)
		kubelet := "-"
		for _, k := range u.steps {
			if k.kubelet && k.node == s.node {
				kubelet = sec(k.done.Sub(k.begun))
			}
		}
		fmt.Printf("| %s | %s | %d | %s | %s | %s | %s |\n", s.node, sec(took), len(s.kubeadm), sec(s.kubeadmSum()), sec(s.gate),
			sec(took-s.kubeadmSum()-s.gate), kubelet)
	}

	fmt.Println("\nhand-offs: from one step recorded done (its node healthy) to the next step begun by the next node's agent")
	fmt.Println()
	fmt.Println("| from | to | done -> next begun | transitions between (the record's history) |")
	fmt.Println("|---|---|---|---|")
	var handoffs time.Duration
	for i := 1; i < len(u.steps); i++ {
		prev, next := u.steps[i-1], u.steps[i]
		d := next.begun.Sub(prev.done)
		handoffs += d
		fmt.Printf("| %s %s | %s %s | %s | %s |\n", prev.node, prev.step, next.node, next.step, ms(d), u.between(prev, next))
	}

	whole := u.last.Sub(u.first)
	fmt.Println("\nthe whole upgrade against the sum of its kubeadm runs")
	fmt.Println()
	fmt.Println("| | time |")
	fmt.Println("|---|---|")
	fmt.Printf("| upgrade-apply --wait, as the operator waits (preflight and start included) | %s |\n", sec(u.wait))
	fmt.Printf("| first step begun -> last step done | %s |\n", sec(whole))
	fmt.Printf("| sum of the %d kubeadm runs | %s |\n", runs, sec(kubeadm))
	fmt.Printf("| sum of the gates after them (every component on the new release, healthy; the etcd member healthy) | %s |\n", sec(gates))
	fmt.Printf("| sum of the kubelet steps (install, restart, gate) | %s |\n", sec(kubelets))
	fmt.Printf("| sum of the hand-offs | %s |\n", sec(handoffs))
	fmt.Printf("| the rest: the agents' records, the etcd snapshot, kubeadm-config | %s |\n", sec(whole-kubeadm-gates-kubelets-handoffs))
	fmt.Printf("\nthe whole upgrade is %.2f times the sum of its kubeadm runs; %s (%.0f%%) is not kubeadm's\n",
		whole.Seconds()/kubeadm.Seconds(), sec(whole-kubeadm), 100*(whole-kubeadm).Seconds()/whole.Seconds())
}

// between lists the transitions the history records after prev's step
// began and before next's: the state the upgrade moved to, or a node and
// the status it moved to.
func (u *upgradeRun) between(prev, next stepRun) string {
	var out []string
	in := false
	for _, t := range u.history {
		if isStep(t, prev) {
			in = true
			continue
		}
		if !in {
			continue
		}
		if isStep(t, next) {
			break
		}
		s := t.To
		if t.Host != "" {
			s = t.Host + " " + s
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// isStep says whether t began s.
func isStep(t upgrade.Transition, s stepRun) bool {
	if s.kubelet {
		return t.Host == s.node && t.To == s.step
	}
	return t.Host == "" && t.To == s.step
}
