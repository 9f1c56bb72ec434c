package nodestate

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestObserver: a Lease is judged by whether it changes while watched, on
// the watcher's clock, never by its renewTime against a server's clock.
func TestObserver(t *testing.T) {
	start := time.Now()
	seconds := int32(6)
	lease := func(rv string, renewed time.Time) *coordinationv1.Lease {
		rt := metav1.NewMicroTime(renewed)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("cp-0"), ResourceVersion: rv},
			Spec: coordinationv1.LeaseSpec{RenewTime: &rt, LeaseDurationSeconds: &seconds}}
	}
	// renewTime far in the past (another server's clock): it does not count.
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		seen []*coordinationv1.Lease
		at   []time.Duration
		want []Verdict
	}{
		{"unchanged for less than its duration", []*coordinationv1.Lease{lease("1", old), lease("1", old)},
			[]time.Duration{0, 5 * time.Second}, []Verdict{Watching, Watching}},
		{"unchanged for its duration", []*coordinationv1.Lease{lease("1", old), lease("1", old), lease("1", old)},
			[]time.Duration{0, 3 * time.Second, 6 * time.Second}, []Verdict{Watching, Watching, Silent}},
		{"renewed: alive, and stays so", []*coordinationv1.Lease{lease("1", old), lease("2", old.Add(time.Second)), lease("2", old.Add(time.Second))},
			[]time.Duration{0, time.Second, time.Minute}, []Verdict{Watching, Renewed, Renewed}},
		{"a new renewTime without a new resourceVersion counts", []*coordinationv1.Lease{lease("", old), lease("", old.Add(time.Second))},
			[]time.Duration{0, time.Second}, []Verdict{Watching, Renewed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Observer{}
			for i, l := range tc.seen {
				if got, _ := o.Observe(l, start.Add(tc.at[i]), 0); got != tc.want[i] {
					t.Errorf("sighting %d: %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
	// An override of its duration counts as in StaleAfter.
	o := &Observer{}
	o.Observe(lease("1", old), start, 0)
	if got, quiet := o.Observe(lease("1", old), start.Add(2*time.Second), time.Second); got != Silent || quiet != 2*time.Second {
		t.Errorf("overridden: %s after %s", got, quiet)
	}
}
