// Package lazyregexp compiles a regular expression on first use, so that a
// command that never needs it does not pay for it at start-up. It is the one
// way the plugin's packages keep a regular expression (after the Go
// toolchain's own internal/lazyregexp).
package lazyregexp

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr once, on its first call, and
// returns the compiled expression every time. expr must compile.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
