package testcluster

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// loadBalancer is the controlPlaneEndpoint of a StartNodes control plane:
// a TCP proxy that sends each connection to the next API server that
// accepts it, as an HA control plane's load balancer does. While one node's
// API server restarts, the others answer.
//
// Like the haproxy of kubeadm's HA guide it checks each API server
// (GET /readyz, every healthInterval) and sends new connections to those
// that answer it while any does; and like haproxy's `on-marked-down
// shutdown-sessions` it closes the connections to an API server that
// stops answering it. An API server whose local etcd member is down has no
// storage: without this, a client whose connection it holds (client-go
// keeps one HTTP/2 connection) waits on it until the member is back, and
// while a member crash-loops nothing reaches the API through it: not the
// static Pod runners' mirror Pod status, nor a reconfigure watching it.
type loadBalancer struct {
	l        net.Listener
	backends []string
	mu       sync.Mutex
	next     int
	health   []backendHealth
	conns    []map[net.Conn]struct{} // the open upstream connections, by backend
	wg       sync.WaitGroup
	stop     chan struct{}
}

// backendHealth is what the checks saw of one API server.
type backendHealth struct {
	up    bool // its last checks answered /readyz
	fails int  // checks failed in a row
}

// healthInterval is how often each API server's /readyz is checked;
// healthFall is how many checks in a row must fail before it is marked
// down (haproxy's `fall 2`).
const (
	healthInterval = 500 * time.Millisecond
	healthFall     = 2
)

func startLoadBalancer(addr string, backends []string) (*loadBalancer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	lb := &loadBalancer{l: l, backends: backends, health: make([]backendHealth, len(backends)),
		conns: make([]map[net.Conn]struct{}, len(backends)), stop: make(chan struct{})}
	for i := range lb.conns {
		lb.conns[i] = map[net.Conn]struct{}{}
	}
	lb.wg.Add(2)
	go lb.serve()
	go lb.check()
	return lb, nil
}

func (lb *loadBalancer) serve() {
	defer lb.wg.Done()
	for {
		conn, err := lb.l.Accept()
		if err != nil {
			return
		}
		go lb.forward(conn)
	}
}

// order is the backends to try for a new connection: round robin, those
// up first, then the others (a backend not checked up yet may be one
// starting, and with none up the proxy is a plain one).
func (lb *loadBalancer) order() []int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	start := lb.next
	lb.next = (lb.next + 1) % len(lb.backends)
	var up, rest []int
	for k := range lb.backends {
		i := (start + k) % len(lb.backends)
		if lb.health[i].up {
			up = append(up, i)
		} else {
			rest = append(rest, i)
		}
	}
	return append(up, rest...)
}

func (lb *loadBalancer) forward(conn net.Conn) {
	defer conn.Close()
	var upstream net.Conn
	backend := -1
	for _, i := range lb.order() {
		c, err := net.DialTimeout("tcp", lb.backends[i], time.Second)
		if err == nil {
			upstream, backend = c, i
			break
		}
	}
	if upstream == nil {
		return
	}
	lb.mu.Lock()
	lb.conns[backend][upstream] = struct{}{}
	lb.mu.Unlock()
	defer func() {
		lb.mu.Lock()
		delete(lb.conns[backend], upstream)
		lb.mu.Unlock()
		_ = upstream.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}

// check asks every API server for /readyz every healthInterval, until
// Close.
func (lb *loadBalancer) check() {
	defer lb.wg.Done()
	client := &http.Client{Timeout: healthInterval * 2, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a health check, as haproxy's `check verify none`
		DisableKeepAlives: true,
	}}
	for {
		select {
		case <-lb.stop:
			return
		case <-time.After(healthInterval):
		}
		var wg sync.WaitGroup
		for i, b := range lb.backends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lb.judge(i, ready(client, b))
			}()
		}
		wg.Wait()
	}
}

// ready reports whether the API server at addr answers /readyz with 200.
func ready(client *http.Client, addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), client.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// judge records one check of backend i; a backend marked down has its
// connections closed.
func (lb *loadBalancer) judge(i int, ok bool) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	h := &lb.health[i]
	if ok {
		h.up, h.fails = true, 0
		return
	}
	h.fails++
	if !h.up || h.fails < healthFall {
		return
	}
	h.up = false
	for c := range lb.conns[i] {
		_ = c.Close()
	}
}

// Close stops accepting connections and checking the API servers.
func (lb *loadBalancer) Close() {
	_ = lb.l.Close()
	close(lb.stop)
	lb.wg.Wait()
}
