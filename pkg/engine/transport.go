package engine

import "net/http"

// WrapNoWriteRetries keeps client-go from sending a write again by itself.
// client-go re-sends any request, writes included, whose answer is a 5xx
// with Retry-After. A write can commit and still be answered that way (a
// load balancer or an authenticating proxy in front of the API server gives
// up waiting for the answer), and the copy client-go sends again then meets
// our own write: a 409 for an update, AlreadyExists for a create, NotFound
// for a delete. Each says the opposite of what happened, and the edit would
// be applied again.
//
// WrapNoWriteRetries removes Retry-After from 5xx answers to anything but a
// read, so the answer reaches the engine, which takes it for a write that
// may have landed and finds out (see WriteIDAnnotation). Reads keep
// client-go's retries, and so does a 429: throttling refuses a request
// before it runs. It fits rest.Config.Wrap; build every client that writes
// through the engine with it.
func WrapNoWriteRetries(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode >= http.StatusInternalServerError && !readOnly(req.Method) {
			resp.Header.Del("Retry-After")
		}
		return resp, err
	})
}

func readOnly(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}
