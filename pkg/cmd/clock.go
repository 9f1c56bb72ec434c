package cmd

import (
	"os"
	"time"
)

// ClockSkewEnv shifts the plugin's own wall clock by a Go duration ("1h",
// "-30m"). It exists for tests of clock skew: what the plugin stamps and
// judges must not depend on it, since stamps and ages use the API server's
// clock and heartbeats are judged by locally observed time.
const ClockSkewEnv = "KUBEADMCFG_TEST_CLOCK_SKEW"

// localNow is this host's wall clock, shifted by ClockSkewEnv when set.
func localNow() time.Time {
	if skew, err := time.ParseDuration(os.Getenv(ClockSkewEnv)); err == nil {
		return time.Now().Add(skew)
	}
	return time.Now()
}

// localClock is localNow as a clock.
type localClock struct{}

func (localClock) Now() time.Time                  { return localNow() }
func (localClock) Since(t time.Time) time.Duration { return localNow().Sub(t) }
