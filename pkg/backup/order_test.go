package backup

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestNewerMeansHigherResourceVersion (review B3): the clock steps back
// between two backups (an NTP correction, a VM restored from a snapshot),
// so the newer backup carries the earlier time. Latest still takes the
// backup of the higher resourceVersion, and pruning keeps the newest by
// resourceVersion. Backups of the same resourceVersion go by time.
func TestNewerMeansHigherResourceVersion(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(now)
	s := &Store{Dir: t.TempDir(), Clock: clock}
	write := func(rv string, at time.Time) *Backup {
		t.Helper()
		clock.SetTime(at)
		m := meta()
		m.ResourceVersion, m.Reason = rv, ReasonBeforePatch
		b, err := s.Write(doc(t), m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// rv 9 before the step, then the clock goes back an hour: rv 10 and rv
	// 100 look older than rv 9 by their time, and rv 100 older than rv 10.
	rv9 := write("9", now)
	rv100 := write("100", now.Add(-time.Hour))
	rv10 := write("10", now.Add(-2*time.Hour))
	// Two backups of rv 100 (a manual one after the automatic one): by time.
	rv100again := write("100", now.Add(-time.Hour+time.Second))

	latest, err := s.Latest(rv9.Owner())
	if err != nil {
		t.Fatal(err)
	}
	if latest.Name != rv100again.Name {
		t.Fatalf("Latest = %s (rv %s), want %s (rv 100, the later of two)", latest.Name, latest.ResourceVersion, rv100again.Name)
	}
	removed, err := s.PruneOwner(2, rv9.Owner())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sorted([]string{rv9.Name, rv10.Name}), sorted(removed)); diff != "" {
		t.Fatalf("pruned (-want +got):\n%s", diff)
	}
	if _, err := s.Read(rv100.Name); err != nil {
		t.Fatalf("the older backup of rv 100 was pruned: %v", err)
	}
}

func sorted(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}
