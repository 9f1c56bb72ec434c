package upgrade

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

var leases = []string{"run-00", "run-01"}

func at(sec int64) Clock { return Clock{Now: time.Unix(sec, 0), By: "t"} }

func TestRunRecordsTheOutcome(t *testing.T) {
	rec := walkTo(t, UpgradedFirstMaster)
	rn, err := rec.BeginRun(at(10), Run{ID: "c1/1/a", Step: string(UpgradingSecondMaster), Command: "kubeadm upgrade node",
		Interval: time.Second, Leases: leases})
	if err != nil || rn.Lease != "run-00" || rec.State != UpgradingSecondMaster || len(rec.Runners) != 1 {
		t.Fatalf("begin: %v %+v", err, rec)
	}
	// The step is held: a second runner is refused, by --expect too.
	if _, err := rec.BeginRun(at(11), Run{ID: "c2/1/b", Step: string(UpgradingSecondMaster), Leases: leases}); exitcode.FromError(err) != exitcode.Conflict ||
		!strings.Contains(err.Error(), "already being run by c1/1/a") {
		t.Fatalf("second runner: %v", err)
	}
	// A host step runs alongside, with the next Lease.
	hrn, err := rec.BeginRun(at(12), Run{ID: "c1/2/h", Step: string(HostUpgradingKubelet), Host: "worker-1", Leases: leases})
	if err != nil || hrn.Lease != "run-01" {
		t.Fatalf("host run: %v %+v", err, hrn)
	}
	if _, err := rec.BeginRun(at(12), Run{ID: "c1/3/x", Step: string(HostUpgradingEtcd), Host: "worker-2", Leases: leases}); exitcode.FromError(err) != exitcode.Conflict ||
		err.Error() != "all 2 heartbeat Leases are held by running steps; wait for one to finish" {
		t.Fatalf("no Lease left: %v", err)
	}
	// The upgrade's step fails late: its state and the hosts in progress
	// without a runner of their own fail in one change; worker-1 carries on.
	rec.Hosts["controller-1"] = Host{Status: HostUpgradingControlPlane}
	if _, err := rec.EndRun(at(20), "c1/1/a", false, "exited 1: boom"); err != nil {
		t.Fatal(err)
	}
	want := map[string]HostStatus{"controller-1": HostUpgradingControlPlaneFailed, "worker-1": HostUpgradingKubelet}
	if got := hostStatuses(rec); rec.State != UpgradingSecondMasterFailed || rec.Reason != "exited 1: boom" || !cmp.Equal(want, got) {
		t.Fatalf("after a failed run: %s %q %v", rec.State, rec.Reason, got)
	}
	if _, err := rec.EndRun(at(21), "c1/2/h", true, ""); err != nil || rec.Hosts["worker-1"].Status != HostUpgradedKubelet || len(rec.Runners) != 0 {
		t.Fatalf("host run ok: %v %+v", err, rec)
	}
	// The retry is accepted, and succeeds.
	if _, err := rec.BeginRun(at(30), Run{ID: "c1/4/r", Step: string(UpgradingSecondMaster), Expect: string(UpgradingSecondMasterFailed), Leases: leases}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.EndRun(at(40), "c1/4/r", true, ""); err != nil || rec.State != UpgradedSecondMaster {
		t.Fatalf("retry: %v %s", err, rec.State)
	}
}

func TestRunRefusals(t *testing.T) {
	rec := walkTo(t, UpgradedFirstMaster)
	for _, tc := range []struct {
		run  Run
		code exitcode.Code
		want string
	}{
		{Run{Step: "flying"}, exitcode.Usage, `unknown state "flying" in plan starlingx`},
		{Run{Step: string(UpgradedSecondMaster)}, exitcode.Usage, "upgraded-second-master is not a step of plan starlingx; run one of: downloading-images, "},
		{Run{Step: string(UpgradingKubelets)}, exitcode.Usage, "upgrading-kubelets reaches no state of its own in plan starlingx: run its host steps, then move on with upgrade-set"},
		{Run{Step: string(UpgradingStorage)}, exitcode.Conflict, "upgraded-first-master -> upgrading-storage is not allowed"},
		{Run{Step: string(UpgradingSecondMaster), Expect: string(UpgradingFirstMaster)}, exitcode.Conflict, "the upgrade is in upgraded-first-master, not upgrading-first-master as expected"},
		{Run{Step: string(HostUpgradedKubelet), Host: "n"}, exitcode.Usage, "upgraded-kubelet is not a host step of plan starlingx; run one of: upgrading-control-plane, upgrading-kubelet, upgrading-etcd"},
		{Run{Step: "dancing", Host: "n"}, exitcode.Usage, `unknown host status "dancing" in plan starlingx`},
	} {
		_, err := rec.BeginRun(at(1), tc.run)
		if exitcode.FromError(err) != tc.code || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %s (exit %d)", tc.run, err, tc.want, tc.code)
		}
	}
	if rec.State != UpgradedFirstMaster || len(rec.Runners) != 0 {
		t.Fatalf("a refusal changed the record: %+v", rec)
	}
	// A step set by hand is taken over by its runner.
	if _, err := rec.Set(at(2), UpgradingSecondMaster, "", false, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.BeginRun(at(3), Run{ID: "r", Step: string(UpgradingSecondMaster), Leases: leases}); err != nil || len(rec.Runners) != 1 {
		t.Fatalf("take over: %v", err)
	}
	// Someone forces the step to failed: the runner's late success is not
	// recorded, and its entry is gone with the step.
	if _, err := rec.Fail(at(4), "operator"); err != nil || len(rec.Runners) != 0 {
		t.Fatalf("fail: %v %+v", err, rec.Runners)
	}
	if _, err := rec.EndRun(at(5), "r", true, ""); exitcode.FromError(err) != exitcode.Conflict ||
		err.Error() != "the step is no longer held by this run: someone moved it meanwhile (the upgrade is in upgrading-second-master-failed); its outcome was not recorded" {
		t.Fatalf("late success: %v", err)
	}
	if rec.State != UpgradingSecondMasterFailed {
		t.Fatal("the late success overwrote the forced failure")
	}
}

func walkTo(t *testing.T, to State) *Record {
	t.Helper()
	rec, _ := Start(nil, nil, at(0), "v1.37.2", "v1.37.3", "")
	for _, s := range []State{DownloadingImages, DownloadedImages, UpgradingNetworking, UpgradedNetworking, UpgradingStorage,
		UpgradedStorage, UpgradingFirstMaster, UpgradedFirstMaster, UpgradingSecondMaster, UpgradedSecondMaster, UpgradingKubelets} {
		if _, err := rec.Set(at(0), s, "", false, ""); err != nil {
			t.Fatal(err)
		}
		if s == to {
			return rec
		}
	}
	t.Fatalf("%s is not on the way", to)
	return nil
}

func hostStatuses(rec *Record) map[string]HostStatus {
	out := map[string]HostStatus{}
	for n, h := range rec.Hosts {
		out[n] = h.Status
	}
	return out
}

func TestAudit(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, updatedAt string
		hostAt          string // a host's last report, "" for none
		state           State
		wantState       State
		wantErr         exitcode.Code
	}{
		{"stuck", "2026-11-29T10:00:00Z", "", UpgradingFirstMaster, UpgradingFirstMasterFailed, exitcode.OK},
		{"stuck, written in another time zone", "2026-11-29T12:30:00+02:00", "", UpgradingFirstMaster, UpgradingFirstMasterFailed, exitcode.OK},
		{"recent", "2026-11-29T11:30:00Z", "", UpgradingFirstMaster, UpgradingFirstMaster, exitcode.OK},
		{"recent, in another time zone", "2026-11-29T06:30:00-05:00", "", UpgradingFirstMaster, UpgradingFirstMaster, exitcode.OK},
		{"old, but a host reported lately", "2026-11-29T08:00:00Z", "2026-11-29T11:50:00Z", UpgradingKubelets, UpgradingKubelets, exitcode.OK},
		{"old, and the hosts too", "2026-11-29T08:00:00Z", "2026-11-29T09:00:00Z", UpgradingKubelets, UpgradingKubeletsFailed, exitcode.OK},
		{"not in progress", "2026-01-01T00:00:00Z", "", UpgradedFirstMaster, UpgradedFirstMaster, exitcode.OK},
		{"unparsable time", "yesterday", "", UpgradingFirstMaster, UpgradingFirstMaster, exitcode.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &Record{State: tc.state, UpdatedAt: tc.updatedAt, Hosts: map[string]Host{}}
			if tc.hostAt != "" {
				rec.Hosts["worker-7"] = Host{Status: HostUpgradedKubelet, UpdatedAt: tc.hostAt}
			}
			_, err := rec.Audit(Clock{Now: now, By: "audit"}, time.Hour, nil, nil)
			if exitcode.FromError(err) != tc.wantErr {
				t.Fatalf("err %v, want code %d", err, tc.wantErr)
			}
			if rec.State != tc.wantState {
				t.Fatalf("state %s, want %s", rec.State, tc.wantState)
			}
			if tc.wantState != tc.state && !strings.HasPrefix(rec.Reason, "stuck in "+string(tc.state)+" for ") {
				t.Fatalf("reason %q", rec.Reason)
			}
		})
	}
}

func TestAuditHeartbeats(t *testing.T) {
	start := func() *Record {
		rec := walkTo(t, UpgradedFirstMaster)
		if _, err := rec.BeginRun(at(0), Run{ID: "cp", Step: string(UpgradingSecondMaster), Leases: leases}); err != nil {
			t.Fatal(err)
		}
		if _, err := rec.BeginRun(at(0), Run{ID: "w1", Step: string(HostUpgradingKubelet), Host: "worker-1", Leases: leases}); err != nil {
			t.Fatal(err)
		}
		rec.Hosts["controller-1"] = Host{Status: HostUpgradingControlPlane, UpdatedAt: at(0).stamp()}
		return rec
	}
	days := Clock{Now: time.Unix(0, 0).Add(72 * time.Hour), By: "audit"}

	// Alive: never failed, however long it runs.
	rec := start()
	if changed, err := rec.Audit(days, time.Hour, nil, nil); err != nil || changed || rec.State != UpgradingSecondMaster {
		t.Fatalf("alive runner failed: %v %s", err, rec.State)
	}
	// The upgrade's runner stopped: its step fails with the hosts in progress
	// that have no live runner; worker-1's runner is alive and carries on.
	rec = start()
	changed, err := rec.Audit(at(100), time.Hour, map[string]time.Duration{"cp": 5 * time.Second}, nil)
	want := map[string]HostStatus{"controller-1": HostUpgradingControlPlaneFailed, "worker-1": HostUpgradingKubelet}
	if err != nil || !changed || rec.State != UpgradingSecondMasterFailed || !cmp.Equal(want, hostStatuses(rec)) ||
		rec.Reason != "the runner of upgrading-second-master stopped: no heartbeat from cp for 5s" || len(rec.Runners) != 1 {
		t.Fatalf("stale runner: %v %s %v %q %+v", err, rec.State, hostStatuses(rec), rec.Reason, rec.Runners)
	}
	// A host's runner stopped: that host fails, the upgrade's step goes on.
	rec = start()
	if changed, err := rec.Audit(at(100), time.Hour, map[string]time.Duration{"w1": time.Minute}, nil); err != nil || !changed ||
		rec.State != UpgradingSecondMaster || rec.Hosts["worker-1"].Status != HostUpgradingKubeletFailed || len(rec.Runners) != 1 {
		t.Fatalf("stale host runner: %v %s %v", err, rec.State, hostStatuses(rec))
	}
	// A second audit of the same stale runner changes nothing.
	if changed, err := rec.Audit(at(101), time.Hour, map[string]time.Duration{"w1": time.Minute}, nil); err != nil || changed {
		t.Fatalf("second audit: %v %v", changed, err)
	}
}

// TestEncodeBoundsWhatIsStored: reasons are cut, the history gives way to
// the hosts, and past the API server's limit nothing is written and the
// error says what to remove.
func TestEncodeBoundsWhatIsStored(t *testing.T) {
	rec, _ := Start(nil, nil, at(0), "v1.36.4", "v1.37.2", strings.Repeat("é", 2000))
	if n := len(rec.Reason); n > MaxReasonBytes || !strings.HasSuffix(rec.Reason, "...") || len(rec.History[0].Reason) > MaxReasonBytes {
		t.Fatalf("reason of %d bytes stored", n)
	}
	for i := range 60 {
		to := DownloadingImages
		if i%2 == 1 {
			to = DownloadingImagesFailed
		}
		if _, err := rec.Set(at(int64(i)), to, "", false, strings.Repeat("x", 2000)); err != nil {
			t.Fatal(err)
		}
	}
	ann := map[string]string{}
	if err := rec.Encode(ann); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Decode(ann)
	if err != nil || !ok || len(got.History) != HistoryLength || got.State != rec.State || got.Plan.Name != "starlingx" {
		t.Fatalf("round trip: %v, history %d", err, len(got.History))
	}
	// Hosts until the history has to give way, then until nothing fits.
	fits := 0
	for i := 0; ; i++ {
		rec.Hosts[fmt.Sprintf("worker-%05d.example.com", i)] = Host{Status: HostUpgradingKubeletFailed, UpdatedAt: "2026-11-29T12:00:00Z"}
		if i%10 != 0 && i < 2500 {
			fits++
			continue // encode every tenth host, for speed, until near the limit
		}
		err := rec.Encode(map[string]string{})
		if err != nil {
			if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(err.Error(), "remove the entries of hosts that are done with 'upgrade-host NODE none'") {
				t.Fatalf("over the limit: %v", err)
			}
			break
		}
		fits++
		if fits == 1001 && len(rec.History) != HistoryLength {
			t.Fatalf("the history gave way with only 1000 hosts: %d entries", len(rec.History))
		}
	}
	if fits < 2000 {
		t.Fatalf("only %d hosts fit", fits)
	}
	t.Logf("%d hosts with 24-byte names fit in the annotations beside the starlingx plan", fits)
	if _, _, err := Decode(map[string]string{KeyState: "x", KeyHosts: "{"}); exitcode.FromError(err) != exitcode.Invalid {
		t.Fatalf("bad hosts: %v", err)
	}
	if _, _, err := Decode(map[string]string{KeyState: "x", KeyPlan: `{"name":"x","steps":[],"extra":1}`}); exitcode.FromError(err) != exitcode.Invalid ||
		!strings.Contains(err.Error(), "not a plan this plugin knows") {
		t.Fatalf("stored plan with unknown fields: %v", err)
	}
	if _, err := Start(rec, nil, Clock{}, "", "v1.38.0", ""); exitcode.FromError(err) != exitcode.Conflict {
		t.Fatalf("start over a running upgrade: %v", err)
	}
}

// TestRecordBeforePlansReadsAsStarlingx: annotations written before plans
// existed follow the default plan, which is stored with the next change.
func TestRecordBeforePlansReadsAsStarlingx(t *testing.T) {
	old := map[string]string{KeyState: string(UpgradedFirstMaster), KeyFromVersion: "v1.37.2", KeyToVersion: "v1.37.3",
		KeyUpdatedAt: "2026-11-29T12:00:00Z", KeyReason: "", KeyHosts: "{}", KeyHistory: "[]"}
	rec, ok, err := Decode(old)
	if err != nil || !ok || rec.Plan.Name != DefaultPlan {
		t.Fatalf("%v %v %+v", ok, err, rec)
	}
	if _, err := rec.Set(at(1), UpgradingSecondMaster, "", false, ""); err != nil {
		t.Fatal(err)
	}
	if err := rec.Encode(old); err != nil || !strings.Contains(old[KeyPlan], `"name":"starlingx"`) {
		t.Fatalf("plan not stored: %v %q", err, old[KeyPlan])
	}
	// The stored plan, not the plugin's, decides.
	custom := mustBuiltin(t, "kubeadm", "a")
	rec = &Record{State: Started, Hosts: map[string]Host{}, Plan: custom}
	ann := map[string]string{}
	if err := rec.Encode(ann); err != nil {
		t.Fatal(err)
	}
	back, _, err := Decode(ann)
	if err != nil || back.Plan.Name != "kubeadm" {
		t.Fatal(err)
	}
	if _, err := back.Set(at(1), DownloadingImages, "", false, ""); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("a starlingx state accepted under the stored kubeadm plan: %v", err)
	}
}

// A version names the kubeadm of its release on each node as spelt, so
// only what Kubernetes spells a release with is recorded; the agents take
// no pre-release, which their kubeadm upgrade would refuse.
func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		version       string
		record, agent string // "" when accepted, else the error
	}{
		{"v1.37.2", "", ""},
		{"v1.38.0-rc.1", "", "v1.38.0-rc.1 is a pre-release, which the agents' kubeadm upgrade refuses"},
		{"v1.38.0-alpha.0", "", "v1.38.0-alpha.0 is a pre-release, which the agents' kubeadm upgrade refuses"},
		{"v1.37.2 ", `want a Kubernetes version such as v1.37.2, not "v1.37.2 "`, `not "v1.37.2 "`},
		{" v1.37.2", `want a Kubernetes version such as v1.37.2, not " v1.37.2"`, `not " v1.37.2"`},
		{"v1.37.2\n", `want a Kubernetes version such as v1.37.2, not "v1.37.2\n"`, `not "v1.37.2\n"`},
		{"v1.37.2+build", `want a Kubernetes version such as v1.37.2, not "v1.37.2+build": build metadata names no release`, "build metadata"},
		{"v1.38.0-rc.1+build", "build metadata names no release", "build metadata"},
		{"1.37.2", `not "1.37.2"`, `not "1.37.2"`},
		{"v1.37", `not "v1.37"`, `not "v1.37"`},
	} {
		t.Run(tc.version, func(t *testing.T) {
			for _, c := range []struct {
				check func(string) error
				want  string
			}{{CheckVersion, tc.record}, {CheckAgentsVersion, tc.agent}} {
				err := c.check(tc.version)
				switch {
				case c.want == "" && err != nil:
					t.Errorf("refused: %v", err)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || exitcode.FromError(err) != exitcode.Usage):
					t.Errorf("got %v (exit %d), want a usage error saying %q", err, exitcode.FromError(err), c.want)
				}
			}
		})
	}
}
