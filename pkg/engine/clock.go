package engine

import (
	"net/http"
	"sync"
	"time"
)

// ServerClock tells the API server's time from the Date header of its
// responses, so that the times every host stamps and the ages every auditor
// measures come from one clock, whatever each host's own clock says. Wrap
// the client's transport with WrapTransport; until a response has been seen
// it falls back to Local.
type ServerClock struct {
	// Local is this host's clock (time.Now when nil).
	Local func() time.Time

	mu   sync.Mutex
	date time.Time // the server's Date header at the last response
	seen time.Time // when that response arrived, on the local monotonic clock
}

// WrapTransport records the Date of every response; it fits rest.Config.Wrap.
func (c *ServerClock) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
				c.mu.Lock()
				c.date, c.seen = d, time.Now()
				c.mu.Unlock()
			}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Now is the API server's time: the last Date seen, plus the time elapsed
// since on the local monotonic clock. Date has whole seconds, so half a
// second is added, which bounds the error to about half a second plus the
// request's latency.
func (c *ServerClock) Now() time.Time {
	c.mu.Lock()
	date, seen := c.date, c.seen
	c.mu.Unlock()
	if date.IsZero() {
		return c.local()
	}
	return date.Add(500 * time.Millisecond).Add(time.Since(seen)).UTC()
}

// FromServer reports whether Now comes from the server (a response with a
// Date header has been seen).
func (c *ServerClock) FromServer() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.date.IsZero()
}

func (c *ServerClock) local() time.Time {
	if c.Local != nil {
		return c.Local()
	}
	return time.Now()
}
