package upgrade

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func mustBuiltin(t *testing.T, name string, nodes ...string) *Plan {
	t.Helper()
	p, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.Instantiate(nodes); err != nil {
		t.Fatal(err)
	}
	return p
}

// starlingxMain is every state from which an abort may start.
var starlingxMain = []State{Started, DownloadingImages, DownloadingImagesFailed, DownloadedImages,
	PreUpdatingApps, PreUpdatingAppsFailed, PreUpdatedApps,
	UpgradingNetworking, UpgradingNetworkingFailed, UpgradedNetworking, UpgradingStorage, UpgradingStorageFailed,
	UpgradedStorage, CordonStarted, CordonFailed, CordonComplete,
	UpgradingFirstMaster, UpgradingFirstMasterFailed, UpgradedFirstMaster, UpgradingSecondMaster,
	UpgradingSecondMasterFailed, UpgradedSecondMaster, UpgradingKubelets, UpgradingKubeletsFailed,
	UncordonStarted, UncordonFailed, UncordonComplete}

// wantStarlingx is the seed system's state diagram written out by hand:
// to -> every from.
var wantStarlingx = map[State][]State{
	Started:                     nil,
	DownloadingImages:           {Started, DownloadingImagesFailed},
	DownloadingImagesFailed:     {DownloadingImages},
	DownloadedImages:            {DownloadingImages},
	PreUpdatingApps:             {DownloadedImages, PreUpdatingAppsFailed},
	PreUpdatingAppsFailed:       {PreUpdatingApps},
	PreUpdatedApps:              {PreUpdatingApps},
	UpgradingNetworking:         {DownloadedImages, PreUpdatedApps, UpgradingNetworkingFailed},
	UpgradingNetworkingFailed:   {UpgradingNetworking},
	UpgradedNetworking:          {UpgradingNetworking},
	UpgradingStorage:            {UpgradedNetworking, UpgradingStorageFailed},
	UpgradingStorageFailed:      {UpgradingStorage},
	UpgradedStorage:             {UpgradingStorage},
	CordonStarted:               {UpgradedStorage, CordonFailed},
	CordonFailed:                {CordonStarted},
	CordonComplete:              {CordonStarted},
	UpgradingFirstMaster:        {UpgradedStorage, CordonComplete, UpgradingFirstMasterFailed},
	UpgradingFirstMasterFailed:  {UpgradingFirstMaster},
	UpgradedFirstMaster:         {UpgradingFirstMaster},
	UpgradingSecondMaster:       {UpgradedFirstMaster, UpgradingSecondMasterFailed},
	UpgradingSecondMasterFailed: {UpgradingSecondMaster},
	UpgradedSecondMaster:        {UpgradingSecondMaster},
	UpgradingKubelets:           {UpgradedFirstMaster, UpgradedSecondMaster, UpgradingKubeletsFailed},
	UpgradingKubeletsFailed:     {UpgradingKubelets},
	UncordonStarted:             {UpgradingKubelets, UncordonFailed},
	UncordonFailed:              {UncordonStarted},
	UncordonComplete:            {UncordonStarted},
	Complete:                    {UpgradingKubelets, UncordonComplete},
	PostUpdatingApps:            {Complete, PostUpdatingAppsFailed},
	PostUpdatingAppsFailed:      {PostUpdatingApps},
	PostUpdatedApps:             {PostUpdatingApps},
	Aborting:                    append(slices.Clone(starlingxMain), AbortingFailed),
	AbortingFailed:              {Aborting},
	Aborted:                     {Aborting},
}

// checkEveryTransition sets every state from every state, without --force,
// and compares with want (to -> every from).
func checkEveryTransition(t *testing.T, p *Plan, want map[State][]State) {
	t.Helper()
	if len(p.States()) != len(want) {
		t.Fatalf("%d states, the table has %d: %v", len(p.States()), len(want), p.States())
	}
	for _, from := range p.States() {
		for _, to := range p.States() {
			allowed := slices.Contains(want[to], from)
			rec := &Record{State: from, Hosts: map[string]Host{}, Plan: p}
			changed, err := rec.Set(Clock{Now: time.Unix(0, 0), By: "test"}, to, "", false, "")
			switch {
			case from == to:
				if err != nil || changed {
					t.Errorf("%s -> %s: staying must be a no-op, got changed=%v err=%v", from, to, changed, err)
				}
			case allowed && (err != nil || !changed || rec.State != to):
				t.Errorf("%s -> %s: want allowed, got %v", from, to, err)
			case !allowed && exitcode.FromError(err) != exitcode.Conflict:
				t.Errorf("%s -> %s: want refused with exit 4, got %v", from, to, err)
			}
		}
	}
}

func TestStarlingxEveryTransition(t *testing.T) {
	checkEveryTransition(t, mustBuiltin(t, "starlingx"), wantStarlingx)
}

func TestKubeadmPlanThreeControlPlaneNodes(t *testing.T) {
	p := mustBuiltin(t, "kubeadm", "cp-0", "cp-1", "cp-2")
	cp := func(n string) (State, State, State) {
		return State("upgrading-control-plane-" + n), State("upgrading-control-plane-" + n + "-failed"), State("upgraded-control-plane-" + n)
	}
	cp0, cp0f, cp0d := cp("cp-0")
	cp1, cp1f, cp1d := cp("cp-1")
	cp2, cp2f, cp2d := cp("cp-2")
	main := []State{Started, cp0, cp0f, cp0d, cp1, cp1f, cp1d, cp2, cp2f, cp2d, UpgradingKubelets, UpgradingKubeletsFailed}
	checkEveryTransition(t, p, map[State][]State{
		Started: nil,
		cp0:     {Started, cp0f}, cp0f: {cp0}, cp0d: {cp0},
		cp1: {cp0d, cp1f}, cp1f: {cp1}, cp1d: {cp1},
		cp2: {cp1d, cp2f}, cp2f: {cp2}, cp2d: {cp2},
		UpgradingKubelets:       {cp2d, UpgradingKubeletsFailed},
		UpgradingKubeletsFailed: {UpgradingKubelets},
		Complete:                {UpgradingKubelets},
		Aborting:                append(slices.Clone(main), AbortingFailed),
		AbortingFailed:          {Aborting},
		Aborted:                 {Aborting},
	})
	if diff := cmp.Diff([]string{"cp-0", "cp-1", "cp-2"}, p.ControlPlaneNodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]HostStatus{HostNone, HostUpgradingKubelet, HostUpgradingKubeletFailed, HostUpgradedKubelet}, p.HostStatuses()); diff != "" {
		t.Errorf("host statuses (-want +got):\n%s", diff)
	}
	if step, steps := p.Position(cp1d); step != 2 || steps != 4 {
		t.Errorf("position of %s: %d of %d", cp1d, step, steps)
	}
	if st := p.StepOf(cp1); st == nil || st.Node != "cp-1" || !strings.HasPrefix(st.Description, "cp-1: ") {
		t.Errorf("step of %s: %+v", cp1, st)
	}
	// One node, and a single-node cluster has no step it never takes.
	one := mustBuiltin(t, "kubeadm", "solo")
	if got := one.Allowed("upgraded-control-plane-solo"); !slices.Equal(got, []State{UpgradingKubelets, Aborting}) {
		t.Errorf("single node: %v", got)
	}
}

// walk moves a record along path with Set and fails on any refusal.
func walk(t *testing.T, p *Plan, path ...State) *Record {
	t.Helper()
	rec, err := Start(nil, p, Clock{Now: time.Unix(0, 0), By: "t"}, "v1.37.2", "v1.37.3", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range path {
		if _, err := rec.Set(Clock{Now: time.Unix(1, 0), By: "t"}, s, "", false, ""); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if !p.Over(rec.State) {
		t.Fatalf("walk ends in %s, which is not over", rec.State)
	}
	return rec
}

func TestEveryBuiltinPlanWalkedEndToEnd(t *testing.T) {
	// The duplex flow, as before plans.
	walk(t, mustBuiltin(t, "starlingx"), DownloadingImages, DownloadedImages, UpgradingNetworking, UpgradedNetworking,
		UpgradingStorage, UpgradedStorage, UpgradingFirstMaster, UpgradedFirstMaster, UpgradingSecondMaster,
		UpgradedSecondMaster, UpgradingKubelets, Complete)
	// The single-node flow, with every optional step.
	walk(t, mustBuiltin(t, "starlingx"), DownloadingImages, DownloadedImages, PreUpdatingApps, PreUpdatedApps,
		UpgradingNetworking, UpgradedNetworking, UpgradingStorage, UpgradedStorage, CordonStarted, CordonComplete,
		UpgradingFirstMaster, UpgradedFirstMaster, UpgradingKubelets, UncordonStarted, UncordonComplete, Complete,
		PostUpdatingApps, PostUpdatedApps)
	walk(t, mustBuiltin(t, "kubeadm", "a", "b", "c"), "upgrading-control-plane-a", "upgraded-control-plane-a",
		"upgrading-control-plane-b", "upgraded-control-plane-b", "upgrading-control-plane-c", "upgraded-control-plane-c",
		UpgradingKubelets, Complete)
	walk(t, mustBuiltin(t, "kubeadm", "a"), Aborting, AbortingFailed, Aborting, Aborted)
}

// customPlan is a plan of one's own, shared with the e2e suite.
func customPlan(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../../testdata/plans/blue-green.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCustomPlan(t *testing.T) {
	tmpl, err := ParsePlan(customPlan(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := tmpl.Instantiate([]string{"m1", "m2"})
	if err != nil {
		t.Fatal(err)
	}
	for from, want := range map[State][]State{
		"begun":             {"draining", "abandoning"},
		"drained":           {"snapshotting", "upgrading-cp-m1", "abandoning"},
		"snapshot-failed":   {"snapshotting", "abandoning"},
		"upgraded-cp-m1":    {"upgrading-cp-m2", "abandoning"},
		"checking":          {"checking-failed", "checked", "abandoning"},
		"checking-failed":   {"checking", "rolling-back", "abandoning"},
		"checked":           {"done", "abandoning"},
		"rolled-back":       {"done", "abandoning"},
		"done":              nil,
		"abandoning":        {"abandoning-failed", "abandoned"},
		"abandoning-failed": {"abandoning"},
	} {
		if diff := cmp.Diff(want, p.Allowed(from)); diff != "" {
			t.Errorf("from %s (-want +got):\n%s", from, diff)
		}
	}
	walk(t, p, "draining", "drained", "upgrading-cp-m1", "upgraded-cp-m1", "upgrading-cp-m2", "upgraded-cp-m2",
		"checking", "checking-failed", "rolling-back", "rolled-back", "done")
	if !p.Over("abandoned") || p.Over("checked") {
		t.Error("over")
	}
	rec := &Record{Hosts: map[string]Host{}, Plan: p}
	if _, err := rec.SetHost(Clock{}, "n1", "rebooting", "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.SetHost(Clock{}, "n1", HostUpgradingKubelet, "", false); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("another plan's host status: %v", err)
	}
}

// TestBadPlans: every problem is reported in one error, exit 3.
func TestBadPlans(t *testing.T) {
	for _, tc := range []struct{ name, plan, want string }{
		{"unreachable state", `
name: loop
steps:
- {name: a, reaches: a-done}
- {name: b, reaches: b-done, after: [c-done]}
- {name: c, reaches: c-done, after: [b-done]}
`, "plan loop is invalid: unreachable from upgrade-started: b, b-failed, b-done, c, c-failed, c-done, upgrade-complete"},
		{"duplicate names", `
name: dup
steps:
- {name: a, reaches: done-a}
- {name: b, reaches: done-a}
`, "plan dup is invalid: state done-a is named twice"},
		{"a -failed that is not the failure of a step", `
name: fails
steps:
- {name: a, reaches: a-failed}
`, "plan fails is invalid: state a-failed is named twice"},
		{"a -failed state reached", `
name: fails
steps:
- {name: a, failed: a-broken, reaches: a-really-failed}
`, "plan fails is invalid: failed state a-broken must end in -failed; a-really-failed ends in -failed but is the state a step reaches; -failed states are only for steps in progress"},
		{"a -failed start", `
name: fails
start: never-failed
steps:
- {name: a, reaches: b}
`, "plan fails is invalid: never-failed ends in -failed but is the start; -failed states are only for steps in progress"},
		{"unknown after", `
name: after
steps:
- {name: a, reaches: b, after: [nowhere]}
`, "plan after is invalid: step a starts after nowhere, which is not a state of the plan; unreachable from upgrade-started: a, a-failed, b, upgrade-complete"},
		{"no steps", "name: empty\n", "plan empty is invalid: no steps"},
		{"bad names", `
name: Bad_Plan
steps:
- {name: "Upgrading Everything", reaches: done}
hostSteps:
- {name: none, reaches: x}
`, `plan Bad_Plan is invalid: name "Bad_Plan" must be lowercase letters, digits and '-'; "Upgrading Everything" is not a state name (lowercase letters, digits, '-' and '.'); "Upgrading Everything-failed" is not a state name (lowercase letters, digits, '-' and '.'); host status "none" is reserved (it removes a host's entry)`},
		{"abort without an end", `
name: abort
steps:
- {name: a, reaches: b}
abort: {name: giving-up}
`, "plan abort is invalid: abort step giving-up must reach a state"},
		{"forEach without a placeholder", `
name: each
steps:
- {name: a, reaches: b, forEach: control-plane-node}
`, "plan each is invalid: step a is for each control-plane node but its name has no {node}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePlan([]byte(tc.plan))
			if err == nil {
				_, err = p.Instantiate([]string{"n1", "n2"})
			}
			if exitcode.FromError(err) != exitcode.Invalid {
				t.Fatalf("want exit 3, got %v", err)
			}
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, plan, want string }{
		{"unknown field", "name: x\nstep: []\n", `not a plan: error unmarshaling JSON: while decoding JSON: json: unknown field "step"`},
		{"other kind", "kind: Pod\nname: x\n", `plan kind must be UpgradePlan, not "Pod"`},
		{"not YAML", "{", "not a plan: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePlan([]byte(tc.plan))
			if exitcode.FromError(err) != exitcode.Invalid || err.Error() != tc.want {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	tmpl, _ := Builtin("kubeadm")
	if _, err := tmpl.Instantiate(nil); exitcode.FromError(err) != exitcode.Usage {
		t.Errorf("no nodes: %v", err)
	}
	if _, err := tmpl.Instantiate([]string{"a", "a", "B"}); err == nil ||
		err.Error() != `plan kubeadm is invalid: control-plane node "a" is given twice; control-plane node "B" is not a node name` {
		t.Errorf("bad nodes: %v", err)
	}
}

func TestRefusalListsAllowed(t *testing.T) {
	rec := &Record{State: UpgradingSecondMaster}
	_, err := rec.Set(Clock{}, Complete, "", false, "")
	want := "upgrading-second-master -> upgrade-complete is not allowed; from upgrading-second-master the upgrade may go to: " +
		"upgrading-second-master-failed, upgraded-second-master, upgrade-aborting"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if _, err := rec.Set(Clock{}, "bogus", "", false, ""); exitcode.FromError(err) != exitcode.Usage ||
		!strings.HasPrefix(err.Error(), `unknown state "bogus" in plan starlingx (one of: upgrade-started, downloading-images, `) {
		t.Fatalf("unknown state: %v", err)
	}
	if changed, err := rec.Set(Clock{}, Complete, "", true, "operator"); err != nil || !changed {
		t.Fatalf("--force: %v", err)
	}
}

func TestEveryHostTransition(t *testing.T) {
	p := mustBuiltin(t, "starlingx")
	upgraded := []HostStatus{HostNone, HostUpgradedControlPlane, HostUpgradedKubelet, HostUpgradedEtcd}
	want := map[HostStatus][]HostStatus{
		HostNone: {HostUpgradingControlPlaneFailed, HostUpgradedControlPlane, HostUpgradingKubeletFailed,
			HostUpgradedKubelet, HostUpgradingEtcdFailed, HostUpgradedEtcd},
		HostUpgradingControlPlane:       append([]HostStatus{HostUpgradingControlPlaneFailed}, upgraded...),
		HostUpgradingControlPlaneFailed: {HostUpgradingControlPlane},
		HostUpgradedControlPlane:        {HostUpgradingControlPlane},
		HostUpgradingKubelet:            append([]HostStatus{HostUpgradingKubeletFailed}, upgraded...),
		HostUpgradingKubeletFailed:      {HostUpgradingKubelet},
		HostUpgradedKubelet:             {HostUpgradingKubelet},
		HostUpgradingEtcd:               append([]HostStatus{HostUpgradingEtcdFailed}, upgraded...),
		HostUpgradingEtcdFailed:         {HostUpgradingEtcd},
		HostUpgradedEtcd:                {HostUpgradingEtcd},
	}
	for _, from := range p.HostStatuses() {
		for _, to := range p.HostStatuses() {
			ok := slices.Contains(want[to], from)
			rec := &Record{Hosts: map[string]Host{}, Plan: p}
			if from != HostNone {
				rec.Hosts["n"] = Host{Status: from}
			}
			changed, err := rec.SetHost(Clock{}, "n", to, "", false)
			switch {
			case from == to:
				if err != nil || changed {
					t.Errorf("%s -> %s: want no-op, got %v", from, to, err)
				}
			case ok && (err != nil || rec.hostStatus("n") != to):
				t.Errorf("%s -> %s: want allowed, got %v", from, to, err)
			case !ok && exitcode.FromError(err) != exitcode.Conflict:
				t.Errorf("%s -> %s: want refused, got %v", from, to, err)
			}
		}
	}
}

func TestFailMovesStateAndHostsInOneWrite(t *testing.T) {
	rec := &Record{State: UpgradingSecondMaster, Hosts: map[string]Host{
		"controller-0": {Status: HostUpgradedControlPlane},
		"controller-1": {Status: HostUpgradingControlPlane},
	}}
	changed, err := rec.Fail(Clock{Now: time.Unix(100, 0), By: "op"}, "forced")
	if err != nil || !changed {
		t.Fatal(err)
	}
	got := map[string]HostStatus{"controller-0": rec.Hosts["controller-0"].Status, "controller-1": rec.Hosts["controller-1"].Status}
	want := map[string]HostStatus{"controller-0": HostUpgradedControlPlane, "controller-1": HostUpgradingControlPlaneFailed}
	if rec.State != UpgradingSecondMasterFailed || !cmp.Equal(want, got) {
		t.Fatalf("state %s hosts %v", rec.State, got)
	}
	// The retry is accepted now.
	if _, err := rec.Set(Clock{}, UpgradingSecondMaster, "", false, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.SetHost(Clock{}, "controller-1", HostUpgradingControlPlane, "", false); err != nil {
		t.Fatal(err)
	}
	// Already failed: no change, no error.
	failed := &Record{State: DownloadingImagesFailed, Hosts: map[string]Host{}}
	if changed, err := failed.Fail(Clock{}, ""); err != nil || changed {
		t.Fatalf("already failed: %v %v", changed, err)
	}
	// Not in progress: refused.
	done := &Record{State: Complete}
	if _, err := done.Fail(Clock{}, ""); exitcode.FromError(err) != exitcode.Conflict ||
		err.Error() != "the upgrade is in upgrade-complete, which is not a step in progress; nothing to fail" {
		t.Fatalf("complete: %v", err)
	}
}

func TestExpectStopsLateReports(t *testing.T) {
	rec := &Record{State: UpgradingSecondMasterFailed}
	_, err := rec.Set(Clock{}, UpgradedSecondMaster, UpgradingSecondMaster, false, "late success")
	if exitcode.FromError(err) != exitcode.Conflict || rec.State != UpgradingSecondMasterFailed {
		t.Fatalf("late report: %v, state %s", err, rec.State)
	}
}

func TestStartRefusesWhileNotOver(t *testing.T) {
	p := mustBuiltin(t, "starlingx")
	rec := &Record{State: PostUpdatingApps, Plan: p}
	if _, err := Start(rec, nil, Clock{}, "", "v1.38.0", ""); exitcode.FromError(err) != exitcode.Conflict {
		t.Fatalf("start while apps update: %v", err)
	}
	for _, over := range []State{Complete, PostUpdatedApps, Aborted} {
		rec := &Record{State: over, Plan: p}
		next, err := Start(rec, mustBuiltin(t, "kubeadm", "x"), Clock{}, "", "v1.38.0", "")
		if err != nil || next.Plan.Name != "kubeadm" || next.State != Started {
			t.Fatalf("start after %s: %v", over, err)
		}
	}
}

func TestCheckTemplates(t *testing.T) {
	tmpl, err := ParsePlan([]byte("name: each\nsteps:\n- {name: \"up-{node}\", reaches: done, forEach: control-plane-node}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tmpl.Check(); exitcode.FromError(err) != exitcode.Invalid || err.Error() != "plan each is invalid: state done is named twice" {
		t.Fatalf("a template whose expansion repeats a name: %v", err)
	}
	for _, name := range BuiltinPlans() {
		p, err := Builtin(name)
		if err != nil || p.Check() != nil {
			t.Fatalf("built-in %s: %v %v", name, err, p.Check())
		}
	}
}
