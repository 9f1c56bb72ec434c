package cmdutil

import (
	"fmt"
	"net/http"
	"os"
	"strings"
)

// PanicOnEnv makes the plugin panic when it sends one exact request, given
// as "METHOD /path" (the URL path, without the query): for example
// "GET /api/v1/namespaces/kube-system/configmaps/kubeadm-config". The panic
// happens in whatever goroutine sends the request, before anything is sent,
// so that tests can show that a panic, in the main goroutine or in one the
// plugin started, ends the process as an internal error and never with the
// usage code. It is for tests only and is left out of every help text; a
// value that is not a method, a space and an absolute path does nothing.
const PanicOnEnv = "KUBEADMCFG_TEST_PANIC_ON"

// panicOn returns the transport wrapper PanicOnEnv asks for, or nil when
// the variable is unset or malformed.
func panicOn(value string) func(http.RoundTripper) http.RoundTripper {
	method, path, ok := strings.Cut(value, " ")
	if !ok || method == "" || method != strings.ToUpper(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?") {
		return nil
	}
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == method && req.URL.Path == path {
				panic(fmt.Sprintf("%s asked to panic on %s %s", PanicOnEnv, method, path))
			}
			return rt.RoundTrip(req)
		})
	}
}

// panicOnFromEnv is panicOn for the process's environment.
func panicOnFromEnv() func(http.RoundTripper) http.RoundTripper {
	return panicOn(os.Getenv(PanicOnEnv))
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
