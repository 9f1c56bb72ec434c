package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// inOwnNetns reports whether t runs in a network namespace the test made
// itself. Outside one, it runs t again in a new namespace (the test binary
// with -run naming t alone, for up to timeout), passes its output on, and
// reports false: the caller returns, its work done in there.
func inOwnNetns(t *testing.T, timeout time.Duration) bool {
	t.Helper()
	if testcluster.InTestNetns() {
		return true
	}
	// Each runs in a process and a network namespace of its own: two can
	// run side by side (go test -parallel, GOMAXPROCS by default).
	t.Parallel()
	// With go test -v its output shows as it comes. Without, go test shows
	// a failed test's output alone, and this one's can run to thousands of
	// lines (its cluster's and agents' logs): the lines that say why it
	// failed come first, then the whole of it.
	start := time.Now()
	var lines []string
	err := testcluster.ReexecInNetns(context.Background(), "^"+t.Name()+"$", timeout, func(line string) {
		lines = append(lines, line)
		if testing.Verbose() {
			t.Log(line)
		}
	})
	if err != nil {
		t.Log("why it failed:\n" + strings.Join(testcluster.FailureLines(lines, 40), "\n"))
		if !testing.Verbose() {
			t.Log("its whole output:\n" + strings.Join(lines, "\n"))
		}
	}
	t.Logf("%s in its network namespace took %s", t.Name(), time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// step is one step of a test whose steps run in order on one cluster C.
type step[C any] struct {
	name string
	run  func(t *testing.T, c C)
}

// runSteps runs steps in order on c, and none after the first that fails:
// each builds on what the ones before left.
func runSteps[C any](t *testing.T, c C, steps []step[C]) {
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, c) }) {
			return
		}
	}
}
