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
