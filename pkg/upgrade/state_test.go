package upgrade

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// allAborting is every state from which an abort may start.
var allAborting = []State{Started, DownloadingImages, DownloadingImagesFailed, DownloadedImages,
	UpgradingNetworking, UpgradingNetworkingFailed, UpgradedNetworking, UpgradingStorage, UpgradingStorageFailed,
	UpgradedStorage, UpgradingFirstMaster, UpgradingFirstMasterFailed, UpgradedFirstMaster, UpgradingSecondMaster,
	UpgradingSecondMasterFailed, UpgradedSecondMaster, UpgradingKubelets, UpgradingKubeletsFailed, AbortingFailed}

// wantAllowed is the state diagram written out by hand: to -> every from.
var wantAllowed = map[State][]State{
	Started:                     nil,
	DownloadingImages:           {Started, DownloadingImagesFailed},
	DownloadingImagesFailed:     {DownloadingImages},
	DownloadedImages:            {DownloadingImages},
	UpgradingNetworking:         {DownloadedImages, UpgradingNetworkingFailed},
	UpgradingNetworkingFailed:   {UpgradingNetworking},
	UpgradedNetworking:          {UpgradingNetworking},
	UpgradingStorage:            {UpgradedNetworking, UpgradingStorageFailed},
	UpgradingStorageFailed:      {UpgradingStorage},
	UpgradedStorage:             {UpgradingStorage},
	UpgradingFirstMaster:        {UpgradedStorage, UpgradingFirstMasterFailed},
	UpgradingFirstMasterFailed:  {UpgradingFirstMaster},
	UpgradedFirstMaster:         {UpgradingFirstMaster},
	UpgradingSecondMaster:       {UpgradedFirstMaster, UpgradingSecondMasterFailed},
	UpgradingSecondMasterFailed: {UpgradingSecondMaster},
	UpgradedSecondMaster:        {UpgradingSecondMaster},
	UpgradingKubelets:           {UpgradedSecondMaster, UpgradingKubeletsFailed},
	UpgradingKubeletsFailed:     {UpgradingKubelets},
	Complete:                    {UpgradingKubelets},
	Aborting:                    allAborting,
	AbortingFailed:              {Aborting},
	Aborted:                     {Aborting},
}

// TestEveryTransition checks every pair of states, allowed and refused.
func TestEveryTransition(t *testing.T) {
	if len(States()) != len(wantAllowed) {
		t.Fatalf("%d states, the table has %d", len(States()), len(wantAllowed))
	}
	for _, from := range States() {
		for _, to := range States() {
			want := false
			for _, f := range wantAllowed[to] {
				want = want || f == from
			}
			rec := &Record{State: from, Hosts: map[string]Host{}}
			changed, err := rec.Set(Clock{Now: time.Unix(0, 0), By: "test"}, to, "", false, "")
			switch {
			case from == to:
				if err != nil || changed {
					t.Errorf("%s -> %s: staying must be a no-op, got changed=%v err=%v", from, to, changed, err)
				}
			case want && (err != nil || !changed || rec.State != to):
				t.Errorf("%s -> %s: want allowed, got %v", from, to, err)
			case !want && exitcode.FromError(err) != exitcode.Conflict:
				t.Errorf("%s -> %s: want refused with exit 4, got %v", from, to, err)
			}
		}
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
	if _, err := rec.Set(Clock{}, "bogus", "", false, ""); exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("unknown state: %v", err)
	}
	if changed, err := rec.Set(Clock{}, Complete, "", true, "operator"); err != nil || !changed {
		t.Fatalf("--force: %v", err)
	}
}

func TestEveryHostTransition(t *testing.T) {
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
	for _, from := range HostStatuses() {
		for _, to := range HostStatuses() {
			ok := false
			for _, f := range want[to] {
				ok = ok || f == from
			}
			rec := &Record{Hosts: map[string]Host{}}
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

func TestAudit(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, updatedAt string
		state           State
		wantState       State
		wantErr         exitcode.Code
	}{
		{"stuck", "2026-11-29T10:00:00Z", UpgradingFirstMaster, UpgradingFirstMasterFailed, exitcode.OK},
		{"stuck, written in another time zone", "2026-11-29T12:30:00+02:00", UpgradingFirstMaster, UpgradingFirstMasterFailed, exitcode.OK},
		{"recent", "2026-11-29T11:30:00Z", UpgradingFirstMaster, UpgradingFirstMaster, exitcode.OK},
		{"recent, in another time zone", "2026-11-29T06:30:00-05:00", UpgradingFirstMaster, UpgradingFirstMaster, exitcode.OK},
		{"not in progress", "2026-01-01T00:00:00Z", UpgradedFirstMaster, UpgradedFirstMaster, exitcode.OK},
		{"unparsable time", "yesterday", UpgradingFirstMaster, UpgradingFirstMaster, exitcode.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &Record{State: tc.state, UpdatedAt: tc.updatedAt, Hosts: map[string]Host{}}
			_, err := rec.Audit(Clock{Now: now, By: "audit"}, time.Hour)
			if exitcode.FromError(err) != tc.wantErr {
				t.Fatalf("err %v, want code %d", err, tc.wantErr)
			}
			if rec.State != tc.wantState {
				t.Fatalf("state %s, want %s", rec.State, tc.wantState)
			}
			if tc.wantState != tc.state && rec.Reason != "stuck in upgrading-first-master for 2h0m0s" && rec.Reason != "stuck in upgrading-first-master for 1h30m0s" {
				t.Fatalf("reason %q", rec.Reason)
			}
		})
	}
}

func TestEncodeDecodeKeepsHistoryBounded(t *testing.T) {
	rec, _ := Start(nil, Clock{Now: time.Unix(0, 0), By: "op"}, "v1.36.4", "v1.37.2", "")
	for i := range 60 {
		to := DownloadingImages
		if i%2 == 1 {
			to = DownloadingImagesFailed
		}
		if _, err := rec.Set(Clock{Now: time.Unix(int64(i), 0)}, to, "", false, ""); err != nil {
			t.Fatal(err)
		}
	}
	ann := map[string]string{}
	rec.Encode(ann)
	got, ok, err := Decode(ann)
	if err != nil || !ok {
		t.Fatal(err)
	}
	if len(got.History) != HistoryLength || got.State != rec.State || got.ToVersion != "v1.37.2" {
		t.Fatalf("history %d, state %s", len(got.History), got.State)
	}
	if _, _, err := Decode(map[string]string{KeyState: "x", KeyHosts: "{"}); exitcode.FromError(err) != exitcode.Invalid {
		t.Fatalf("bad hosts: %v", err)
	}
	if _, err := Start(rec, Clock{}, "", "v1.38.0", ""); exitcode.FromError(err) != exitcode.Conflict {
		t.Fatalf("start over a running upgrade: %v", err)
	}
}
