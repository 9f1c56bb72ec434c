package cmdutil

import (
	"os"
	"time"
)

// ClockSkewEnv shifts the plugin's own wall clock by a Go duration ("1h",
// "-30m"). It exists for tests of clock skew: what the plugin stamps and
// judges must not depend on it, since stamps and ages use the API server's
// clock and heartbeats are judged by locally observed time.
const ClockSkewEnv = "KUBEADMCFG_TEST_CLOCK_SKEW"

// LocalNow is this host's wall clock, shifted by ClockSkewEnv when set. Every
// verb that needs the local time reads it here, so that one variable skews
// them all in tests.
func LocalNow() time.Time {
	if skew, err := time.ParseDuration(os.Getenv(ClockSkewEnv)); err == nil {
		return time.Now().Add(skew)
	}
	return time.Now()
}

// localClock is LocalNow as a clock.
type localClock struct{}

func (localClock) Now() time.Time                  { return LocalNow() }
func (localClock) Since(t time.Time) time.Duration { return LocalNow().Sub(t) }
