package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Before an upgrade the agents carry out starts: kubeadm's version rules,
// no other work under way, every control-plane node's agent alive with the
// target's kubeadm, and etcd healthy.

// MaxKubeletMinorSkew is how many minor versions a kubelet may be older
// than the version the control plane is upgraded to: kubeadm 1.37 refuses
// (without --force) an upgrade that would leave a kubelet further behind.
// It is kubeadm's MaximumAllowedMinorVersionKubeletSkew, checked by
// detectTooOldKubelets in cmd/kubeadm/app/phases/upgrade/policy.go
// (k8s.io/kubernetes v1.37.2): newVersion.Minor() > kubelet.Minor()+3 is
// too old. kubeadm checks no kubelet newer than the target; neither does
// this.
const MaxKubeletMinorSkew = 3

// MaxUpgradeMinorSkew is how many minor versions one upgrade may go up:
// kubeadm's MaximumAllowedMinorVersionUpgradeSkew (the same policy.go).
const MaxUpgradeMinorSkew = 1

// ApplySpec is an upgrade the agents are asked to carry out.
type ApplySpec struct {
	// Version is the target, such as v1.37.2.
	Version string
	// Plan is the plan the upgrade follows, as read (a built-in plan or a
	// file), not yet instantiated.
	Plan *upgrade.Plan
	// Nodes are the control-plane nodes in the order the plan takes them;
	// empty: every control-plane node, sorted by name.
	Nodes []string
	// Reason is recorded with the start.
	Reason string
}

// ApplyPlan is an upgrade that passed its preflight.
type ApplyPlan struct {
	// From is kubeadm-config's kubernetesVersion.
	From string
	// Nodes are the control-plane nodes, in the plan's order.
	Nodes []string
	// Plan is the plan instantiated for Nodes, each step that is a node's
	// work assigned to it.
	Plan *upgrade.Plan
}

// PreflightError is an upgrade the preflight refused: every problem it
// found, each in one phrase. Nothing was written.
type PreflightError struct {
	Problems []string
}

func (e *PreflightError) Error() string {
	return "preflight failed, nothing was started: " + strings.Join(e.Problems, "; ")
}

// Preflight checks that spec can start now and returns what the start
// writes. It refuses with exit 4, writing nothing, naming every problem
// (a *PreflightError):
//   - another upgrade not over, or a rollout active;
//   - kubeadm's version rules against kubeadm-config's kubernetesVersion:
//     no downgrade, at most one minor version up (a patch release of the
//     same minor, or the same version again, is allowed), and no kubelet
//     left more than MaxKubeletMinorSkew minor versions behind (every Node
//     must report its kubelet's version);
//   - spec.Nodes that are not the control-plane nodes, or leave one out;
//   - a control-plane node whose agent is missing or lost (judged as a
//     rollout's preflight judges it: a Lease that looks stale is watched
//     first, see agentProblems), that has no kubeadm of the target as its
//     agent publishes them, or whose etcd member its agent finds unhealthy
//     (with etcd local to the nodes, every agent must say).
//
// A spec.Version upgrade.CheckAgentsVersion refuses (not a version, or a
// pre-release) is a usage error (exit 2), checked before anything is read.
// An unreadable record, kubeadm-config or plan, and a cluster with no
// control-plane node, are errors of their own.
func (o *Upgrades) Preflight(ctx context.Context, spec ApplySpec) (*ApplyPlan, error) {
	if err := upgrade.CheckAgentsVersion(spec.Version); err != nil {
		return nil, err
	}
	target, err := version.ParseSemantic(spec.Version)
	if err != nil {
		return nil, exitcode.Usagef("want a Kubernetes version such as v1.37.2, not %q", spec.Version)
	}
	var problems []string
	rec, _, err := o.Read(ctx)
	if err != nil {
		return nil, err
	}
	if rec != nil && !rec.PlanOf().Over(rec.State) {
		busy := &upgrade.InProgressError{From: rec.FromVersion, To: rec.ToVersion, State: rec.State}
		problems = append(problems, busy.Error())
	}
	active, err := o.activeRollout(ctx)
	if err != nil {
		return nil, err
	}
	if active != "" {
		problems = append(problems, active)
	}
	doc, err := o.Rollouts.Config.Document(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := clusterconfig.Parse([]byte(doc))
	if err != nil {
		return nil, err
	}
	from := cfg.KubernetesVersion()
	problems = append(problems, versionProblems(from, target, spec.Version)...)

	nodes, err := o.Record.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	cps := controlPlane(nodes)
	if len(cps) == 0 {
		return nil, exitcode.Conflictf("no node is labelled %s: there is no control-plane node to upgrade (is this a kubeadm cluster?)", engine.ControlPlaneLabel)
	}
	order := spec.Nodes
	if len(order) == 0 {
		order = cps
	}
	problems = append(problems, orderProblems(order, cps)...)
	plan, err := spec.Plan.Instantiate(order)
	if err != nil {
		return nil, err
	}
	if err := plan.AssignNodes(order); err != nil {
		return nil, err
	}

	kubelets := kubeletProblems(nodes, target, spec.Version)
	agents, err := o.agentProblems(ctx, cps, target, spec.Version, !cfg.ExternalEtcd(), len(problems)+len(kubelets) > 0)
	if err != nil {
		return nil, err
	}
	problems = append(append(problems, agents...), kubelets...)
	if len(problems) > 0 {
		return nil, exitcode.New(exitcode.Conflict, &PreflightError{Problems: problems})
	}
	return &ApplyPlan{From: from, Nodes: order, Plan: plan}, nil
}

// activeRollout says which rollout is active, as a preflight problem; ""
// when none is. The agents carry out one kind of work at a time.
func (o *Upgrades) activeRollout(ctx context.Context) (string, error) {
	rollouts, _, err := o.Rollouts.Read(ctx)
	if err != nil {
		return "", err
	}
	if s := rollouts.Status; s != nil && s.Phase.Active() {
		return fmt.Sprintf("rollout %d (%s) is %s, started by %s: the agents carry out one kind of work at a time; let it end first",
			s.ID, s.Kind, s.Phase, s.StartedBy), nil
	}
	return "", nil
}

// versionProblems checks kubeadm's rules for an upgrade from
// kubeadm-config's kubernetesVersion from to target (spelt to): no
// downgrade, at most MaxUpgradeMinorSkew minor versions up.
func versionProblems(from string, target *version.Version, to string) []string {
	current, err := version.ParseSemantic(from)
	switch {
	case from == "":
		return []string{"kubeadm-config has no kubernetesVersion: kubeadm's version rules cannot be checked"}
	case err != nil:
		return []string{fmt.Sprintf("kubeadm-config's kubernetesVersion %q is not a version such as v1.36.3: kubeadm's version rules cannot be checked", from)}
	case target.Major() != current.Major():
		return []string{fmt.Sprintf("%s is another major version than kubeadm-config's kubernetesVersion %s: kubeadm upgrades one minor version at a time", to, from)}
	case target.LessThan(current):
		return []string{fmt.Sprintf("%s is older than kubeadm-config's kubernetesVersion %s: upgrade-apply does not downgrade", to, from)}
	case target.Minor() > current.Minor()+MaxUpgradeMinorSkew:
		return []string{fmt.Sprintf("%s is %d minor versions ahead of kubeadm-config's kubernetesVersion %s: kubeadm upgrades one minor version at a time (to v%d.%d first)",
			to, target.Minor()-current.Minor(), from, current.Major(), current.Minor()+1)}
	}
	return nil
}

// controlPlane is the names of the control-plane nodes among nodes, sorted.
func controlPlane(nodes []corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		if _, ok := n.Labels[engine.ControlPlaneLabel]; ok {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// orderProblems checks an order given against the control-plane nodes:
// each must be one, and none may be left out, since every control-plane
// node runs the version the upgrade goes to once it is complete.
func orderProblems(order, cps []string) []string {
	var unknown, missing []string
	for _, n := range order {
		if !slices.Contains(cps, n) {
			unknown = append(unknown, n)
		}
	}
	for _, n := range cps {
		if !slices.Contains(order, n) {
			missing = append(missing, n)
		}
	}
	var problems []string
	switch len(unknown) {
	case 0:
	case 1:
		problems = append(problems, fmt.Sprintf("node %s is not a control-plane node (the control-plane nodes: %s)", unknown[0], joinNames(cps)))
	default:
		problems = append(problems, fmt.Sprintf("nodes %s are not control-plane nodes (the control-plane nodes: %s)", joinNames(unknown), joinNames(cps)))
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("the order leaves out control-plane node %s: an upgrade takes every control-plane node", joinNames(missing)))
	}
	return problems
}

// agentProblems judges every control-plane node's agent as a rollout's
// preflight does (Rollouts.agentProblem): missing, or lost, is a problem;
// one whose Lease looks stale by the API server's clock is watched, for up
// to its own duration, before it is taken for lost, unless refuseNow (the
// preflight refuses anyway) or ctx ends, when it is named as looking lost.
// An agent alive must publish target (spelt to) among its kubeadm
// versions, and its etcd member healthy (with localEtcd, it must say).
// Each node with problems is one "node N: ..." entry, in nodes' order.
func (o *Upgrades) agentProblems(ctx context.Context, nodes []string, target *version.Version, to string, localEtcd, refuseNow bool) ([]string, error) {
	watched := &nodestate.Observer{}
	said := ""
	for {
		byNode, at, now, err := o.Rollouts.agentLeases(ctx)
		if err != nil {
			return nil, err
		}
		var out, waitingFor []string
		hard, poll := refuseNow, time.Second
		for _, n := range nodes {
			var texts []string
			switch p, next := o.Rollouts.agentProblem(n, byNode[n], at, now, watched); {
			case p != nil && p.lease:
				texts = append(texts, p.text)
				waitingFor = append(waitingFor, "node "+n+": "+p.waiting)
				poll = min(poll, next)
			case p != nil:
				texts, hard = append(texts, p.text), true
			default:
				texts = publishedProblems(byNode[n], target, to, localEtcd)
				hard = hard || len(texts) > 0
			}
			if len(texts) > 0 {
				out = append(out, fmt.Sprintf("node %s: %s", n, strings.Join(texts, ", ")))
			}
		}
		if hard || len(waitingFor) == 0 {
			return out, nil
		}
		if line := strings.Join(waitingFor, "; "); line != said && o.Rollouts.Progress != nil {
			o.Rollouts.Progress("preflight: waiting for " + line)
			said = line
		}
		select {
		case <-ctx.Done(): // --timeout, or an interrupt: what it found stands
			return out, nil
		case <-time.After(poll):
		}
	}
}

// publishedProblems lists what the agent of a node, alive, publishes on its
// Lease l that keeps the node from being upgraded to target (spelt to): no
// kubeadm of the target among those it finds, its etcd member unhealthy,
// or, with etcd local to the nodes (localEtcd), no word of it.
func publishedProblems(l *coordinationv1.Lease, target *version.Version, to string, localEtcd bool) []string {
	_, s, _, err := nodestate.FromLease(l)
	if err != nil {
		return []string{"what its agent publishes cannot be read: " + err.Error()}
	}
	if s == nil {
		s = &nodestate.State{}
	}
	var problems []string
	switch {
	case len(s.KubeadmVersions) == 0:
		problems = append(problems, "its agent publishes no kubeadm versions (an agent without --kubeadm-template, or older than upgrade-apply)")
	case !hasVersion(s.KubeadmVersions, target):
		problems = append(problems, fmt.Sprintf("no kubeadm %s (its agent finds %s)", to, strings.Join(s.KubeadmVersions, ", ")))
	}
	switch e := s.Etcd; {
	case e == nil && localEtcd:
		problems = append(problems, "its agent publishes no health of its etcd member (kubeadm-config has local etcd)")
	case e != nil && !e.Healthy:
		what := "its etcd member"
		if e.Member != "" {
			what += " " + e.Member
		}
		why := ""
		if e.Error != "" {
			why = ": " + e.Error
		}
		problems = append(problems, what+" is not healthy"+why)
	}
	return problems
}

// hasVersion reports whether versions, as an agent publishes them (with or
// without the leading v), hold target.
func hasVersion(versions []string, target *version.Version) bool {
	for _, v := range versions {
		if parsed, err := version.ParseSemantic(v); err == nil && parsed.EqualTo(target) {
			return true
		}
	}
	return false
}

// kubeletProblems checks every Node's kubelet against target as kubeadm
// does (MaxKubeletMinorSkew): a Node that reports no version, or one
// kubeadm cannot read, is a problem, as it is to kubeadm.
func kubeletProblems(nodes []corev1.Node, target *version.Version, to string) []string {
	var unreported []string
	tooOld := map[string][]string{} // by version
	for _, n := range nodes {
		v := n.Status.NodeInfo.KubeletVersion
		kubelet, err := version.ParseSemantic(v)
		switch {
		case v == "" || err != nil:
			unreported = append(unreported, n.Name)
		case target.Minor() > kubelet.Minor()+MaxKubeletMinorSkew:
			tooOld[v] = append(tooOld[v], n.Name)
		}
	}
	var problems []string
	if len(unreported) > 0 {
		slices.Sort(unreported)
		problems = append(problems, fmt.Sprintf("no kubelet version that kubeadm can read reported by node %s (status.nodeInfo.kubeletVersion)", someNames(unreported)))
	}
	for _, v := range slices.Sorted(maps.Keys(tooOld)) {
		slices.Sort(tooOld[v])
		problems = append(problems, fmt.Sprintf("the kubelet of node %s is %s, more than %d minor versions older than %s, which kubeadm refuses: upgrade it first",
			someNames(tooOld[v]), v, MaxKubeletMinorSkew, to))
	}
	return problems
}

// someNames lists at most ten names, and says how many more there are.
func someNames(names []string) string {
	const most = 10
	if len(names) <= most {
		return joinNames(names)
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}
