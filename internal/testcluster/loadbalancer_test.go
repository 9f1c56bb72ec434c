package testcluster

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The load balancer sends new connections only to API servers that answer
// /readyz, and closes those it holds to one that stops answering: a
// client kept on an API server without storage moves to another.
func TestLoadBalancerLeavesAnUnreadyAPIServer(t *testing.T) {
	var aReady atomic.Bool
	aReady.Store(true)
	backend := func(name string, ready func() bool) *httptest.Server {
		s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" && !ready() {
				http.Error(w, "[-]etcd failed", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, name)
		}))
		t.Cleanup(s.Close)
		return s
	}
	a := backend("a", aReady.Load)
	b := backend("b", func() bool { return true })
	lb, err := startLoadBalancer("127.0.0.1:0", []string{a.Listener.Addr().String(), b.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	addr := lb.l.Addr().String()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the test servers' own certificates
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		MaxConnsPerHost: 1,
	}}
	defer client.CloseIdleConnections()
	get := func() string {
		resp, err := client.Get("https://lb/")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	up := func(i int) bool { lb.mu.Lock(); defer lb.mu.Unlock(); return lb.health[i].up }
	waitUntil("both backends checked up", func() bool { return up(0) && up(1) })
	// One kept connection, on a.
	waitUntil("a connection on a", func() bool {
		if get() == "a" {
			return true
		}
		client.CloseIdleConnections()
		return false
	})
	aReady.Store(false)
	waitUntil("a marked down", func() bool { return !up(0) })
	for range 4 {
		if got := get(); got != "b" {
			t.Errorf("a request after a stopped answering /readyz reached %q, want b", strings.TrimSpace(got))
		}
		client.CloseIdleConnections()
	}
}
