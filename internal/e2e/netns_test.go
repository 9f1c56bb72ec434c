package e2e

import (
	"context"
	"flag"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// The tests that start control planes of their own (several nodes, agents,
// upgrades) spend most of their time waiting for components to restart,
// and the tests on the shared cluster run one after another: neither keeps
// two cores busy alone. TestMain starts the first kind at once, beside the
// second, at most -test.parallel of them at a time (one fewer while the
// tests on the shared cluster run), longest first.

// ownNetns lists the tests that run in a network namespace of their own
// (inOwnNetns), longest first, with how long each may take there.
var ownNetns = []struct {
	name    string
	timeout time.Duration
}{
	{"TestUpgradeFailuresByAgents", 40 * time.Minute},
	{"TestRolloutRecoveryOnAgents", 40 * time.Minute},
	{"TestAgent", 40 * time.Minute},
	{"TestUpgradeByAgents", 40 * time.Minute},
	{"TestRolloutOnAgents", 40 * time.Minute},
	{"TestReconfigure", 20 * time.Minute},
	{"TestAgentAsDocumented", 40 * time.Minute},
	{"TestEtcdReconfigure", 40 * time.Minute},
}

// ownCluster bounds how many tests with control planes of their own run at
// once: as many as -test.parallel, one fewer until the tests on the shared
// cluster are done (the first parallel test to go on says so).
type ownCluster struct {
	tokens     chan struct{}
	serialOnce sync.Once
}

func newOwnCluster(parallel int) *ownCluster {
	g := &ownCluster{tokens: make(chan struct{}, max(parallel, 1))}
	for range cap(g.tokens) - 1 {
		g.tokens <- struct{}{}
	}
	return g
}

func (g *ownCluster) acquire() { <-g.tokens }
func (g *ownCluster) release() { g.tokens <- struct{}{} }

// serialDone gives back the token held for the tests on the shared
// cluster: parallel tests go on only once those have run.
func (g *ownCluster) serialDone() { g.serialOnce.Do(g.release) }

var (
	owned    *ownCluster       // set by TestMain
	netnsRun map[string]*nsRun // set by TestMain, read-only afterwards
	// netnsEnv is the environment TestMain set up (PATH to the built
	// plugin, HOME, the backup directory), taken before any test runs: a
	// run started later must not inherit a t.Setenv of a test running
	// beside it.
	netnsEnv []string
	// runsCtx ends the runs no test waits for (stopOwnNetns).
	runsCtx, stopRuns = context.WithCancel(context.Background())
)

// inOwnCluster is for a test that starts a control plane of its own in
// processes and namespaces of its own: it runs beside the others, within
// the bound.
func inOwnCluster(t *testing.T) {
	t.Helper()
	t.Parallel()
	owned.serialDone()
	owned.acquire()
	t.Cleanup(owned.release)
}

// nsRun is one test's run in its own network namespace, and what it printed.
type nsRun struct {
	name    string
	timeout time.Duration
	claimed atomic.Bool
	done    chan struct{}

	mu          sync.Mutex
	lines       []string
	sink        func(string) // with -v, the waiting test's log
	err         error
	start, ends time.Time
}

// runHolding runs r once a token is free, and gives the token back.
func (r *nsRun) runHolding() {
	owned.acquire()
	defer owned.release()
	r.run()
}

func (r *nsRun) run() {
	defer close(r.done)
	r.mu.Lock()
	r.start = time.Now()
	r.mu.Unlock()
	err := testcluster.ReexecInNetns(runsCtx, "^"+r.name+"$", r.timeout, netnsEnv, func(line string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lines = append(r.lines, line)
		if r.sink != nil {
			r.sink(line)
		}
	})
	r.mu.Lock()
	r.err, r.ends = err, time.Now()
	r.mu.Unlock()
}

// follow passes the lines printed so far, and those to come, to sink.
func (r *nsRun) follow(sink func(string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		sink(l)
	}
	r.sink = sink
}

// startOwnNetns starts the listed tests that go test's -run and -skip
// select, in their namespaces, each once a token is free.
func startOwnNetns() {
	parallel, _ := strconv.Atoi(flagValue("test.parallel"))
	owned = newOwnCluster(parallel)
	netnsRun = map[string]*nsRun{}
	netnsEnv = os.Environ()
	if flagValue("test.list") != "" {
		return
	}
	queue := make(chan *nsRun, len(ownNetns))
	for _, tc := range ownNetns {
		if selected(tc.name, flagValue("test.run"), flagValue("test.skip")) {
			r := &nsRun{name: tc.name, timeout: tc.timeout, done: make(chan struct{})}
			netnsRun[tc.name] = r
			queue <- r
		}
	}
	close(queue)
	for range cap(owned.tokens) {
		go func() {
			for r := range queue {
				r.runHolding()
			}
		}()
	}
}

// stopOwnNetns, once the tests have run, kills the runs that no test
// claimed (a -run pattern that startOwnNetns read otherwise than go test),
// rather than leave their clusters running after the suite.
func stopOwnNetns() {
	stopRuns()
	owned.serialDone() // no parallel test may have run to give it back
	for _, r := range netnsRun {
		<-r.done
	}
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// selected reports whether -run and -skip select the top-level test name,
// as go test matches the first element of each pattern. A test it gets
// wrong costs time, not a result: one started but not selected is never
// waited for, and one selected but not started runs when its turn comes.
func selected(name, run, skip string) bool {
	first := func(pattern string) ([]string, bool) {
		elems := splitPattern(pattern)
		re, err := regexp.Compile(elems[0])
		return elems, err == nil && re.MatchString(name)
	}
	if run != "" {
		if _, ok := first(run); !ok {
			return false
		}
	}
	if skip != "" {
		if elems, ok := first(skip); ok && len(elems) == 1 {
			return false
		}
	}
	return true
}

// splitPattern splits a -run pattern at the slashes outside brackets and
// parentheses, as go test does.
func splitPattern(pattern string) []string {
	var elems []string
	depth, start := 0, 0
	for i, c := range pattern {
		switch c {
		case '[', '(':
			depth++
		case ']', ')':
			depth = max(depth-1, 0)
		case '/':
			if depth == 0 {
				elems = append(elems, pattern[start:i])
				start = i + 1
			}
		}
	}
	return append(elems, pattern[start:])
}

// inOwnNetns reports whether t runs in a network namespace the test made
// itself. Outside one, it waits for t's run in a new namespace (the test
// binary with -run naming t alone, which TestMain started, or which it
// starts now), passes its output on, and reports false: the caller
// returns, its work done in there.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if testcluster.InTestNetns() {
		return true
	}
	timeout, ok := listed(t.Name())
	if !ok {
		t.Fatalf("%s runs in a network namespace of its own but is not in ownNetns: add it there, with its timeout", t.Name())
	}
	t.Parallel()
	owned.serialDone()
	r := netnsRun[t.Name()]
	if r == nil || !r.claimed.CompareAndSwap(false, true) {
		// Not started by TestMain: -count above 1, or a -run pattern
		// selected it that startOwnNetns read otherwise.
		r = &nsRun{name: t.Name(), timeout: timeout, done: make(chan struct{})}
		go r.runHolding()
	}
	// With go test -v its output shows as it comes. Without, go test shows
	// a failed test's output alone, and this one's can run to thousands of
	// lines (its cluster's and agents' logs): the lines that say why it
	// failed come first, then the whole of it.
	if testing.Verbose() {
		r.follow(func(line string) { t.Log(line) })
	}
	waited := time.Now()
	<-r.done
	r.mu.Lock()
	err, lines, took := r.err, r.lines, r.ends.Sub(r.start)
	r.mu.Unlock()
	if err != nil {
		t.Log("why it failed:\n" + strings.Join(testcluster.FailureLines(lines, 40), "\n"))
		if !testing.Verbose() {
			t.Log("its whole output:\n" + strings.Join(lines, "\n"))
		}
	}
	t.Logf("%s in its network namespace took %s (this test waited for it %s)", t.Name(), took.Round(time.Second), time.Since(waited).Round(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// listed is the timeout ownNetns gives the test name, if it lists it.
func listed(name string) (time.Duration, bool) {
	for _, tc := range ownNetns {
		if tc.name == name {
			return tc.timeout, true
		}
	}
	return 0, false
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

// TestMain starts a test in its own namespace before go test reaches it
// only when -run and -skip select it as go test would.
func TestSelectedMatchesGoTestsPatterns(t *testing.T) {
	for _, tc := range []struct {
		run, skip string
		want      bool
	}{
		{"", "", true},
		{"^TestAgent$", "", true},
		{"^TestAgentAsDocumented$", "", false},
		{"TestAgent", "", true},
		{"^TestAgent$/SIGTERM", "", true},
		{"^(TestAgent|TestReconfigure)$", "", true},
		{"^Test[AB]gent$/x", "", true},
		{"Upgrade", "", false},
		{"", "^TestAgent$", false},
		{"", "^TestAgent$/SIGTERM", true},
		{"Agent", "Documented", true},
	} {
		if got := selected("TestAgent", tc.run, tc.skip); got != tc.want {
			t.Errorf("-run %q -skip %q: selected %v, want %v", tc.run, tc.skip, got, tc.want)
		}
	}
	if got := splitPattern("^(a/b|c)$/d[/]/e"); !slices.Equal(got, []string{"^(a/b|c)$", "d[/]", "e"}) {
		t.Errorf("splitPattern: %q", got)
	}
}
