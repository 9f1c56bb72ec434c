package upgrade

import "testing"

func TestPhase(t *testing.T) {
	p, err := Builtin("starlingx")
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[State]Phase{
		"upgrade-started":               PhaseWaiting,
		"upgrading-first-master":        PhaseStepInProgress,
		"upgrading-first-master-failed": PhaseStepFailed,
		"cordon-failed":                 PhaseStepFailed,
		"upgraded-first-master":         PhaseWaiting,
		"upgrade-complete":              PhaseOver,
	} {
		if got := p.Phase(s); got != want {
			t.Errorf("%s: got %s, want %s", s, got, want)
		}
	}
}

// A record's phase is its state's, except that a host in a failed status
// is a failed step while the upgrade is not over, whichever plan.
func TestRecordPhase(t *testing.T) {
	c := at(1)
	for _, tc := range []struct {
		name  string
		state State
		hosts map[string]HostStatus
		want  Phase
	}{
		{"kubelets under way", UpgradingKubelets, map[string]HostStatus{"cp-0": HostUpgradedKubelet, "cp-1": HostUpgradingKubelet}, PhaseStepInProgress},
		{"a kubelet failed", UpgradingKubelets, map[string]HostStatus{"cp-0": HostUpgradedKubelet, "cp-1": HostUpgradingKubeletFailed}, PhaseStepFailed},
		{"a host failed between steps", UpgradedFirstMaster, map[string]HostStatus{"cp-0": HostUpgradingControlPlaneFailed}, PhaseStepFailed},
		{"the step failed too", UpgradingKubeletsFailed, map[string]HostStatus{"cp-1": HostUpgradingKubeletFailed}, PhaseStepFailed},
		{"over, a host left failed", Aborted, map[string]HostStatus{"cp-1": HostUpgradingKubeletFailed}, PhaseOver},
		{"no host", UpgradingKubelets, nil, PhaseStepInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := Start(nil, nil, c, "v1.36.3", "v1.37.2", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rec.Set(c, tc.state, "", true, ""); err != nil {
				t.Fatal(err)
			}
			for n, s := range tc.hosts {
				if _, err := rec.SetHost(c, n, s, "", true); err != nil {
					t.Fatal(err)
				}
			}
			if got := rec.Phase(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
