package testcluster

import (
	"io"
	"net"
	"sync"
	"time"
)

// loadBalancer is the controlPlaneEndpoint of a StartNodes control plane:
// a TCP proxy that sends each connection to the next API server that
// accepts it, as an HA control plane's load balancer does. While one node's
// API server restarts, the others answer.
type loadBalancer struct {
	l        net.Listener
	backends []string
	mu       sync.Mutex
	next     int
	wg       sync.WaitGroup
}

func startLoadBalancer(addr string, backends []string) (*loadBalancer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	lb := &loadBalancer{l: l, backends: backends}
	lb.wg.Add(1)
	go lb.serve()
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

func (lb *loadBalancer) forward(conn net.Conn) {
	defer conn.Close()
	lb.mu.Lock()
	start := lb.next
	lb.next = (lb.next + 1) % len(lb.backends)
	lb.mu.Unlock()
	var upstream net.Conn
	for i := range lb.backends {
		c, err := net.DialTimeout("tcp", lb.backends[(start+i)%len(lb.backends)], time.Second)
		if err == nil {
			upstream = c
			break
		}
	}
	if upstream == nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}

// Close stops accepting connections.
func (lb *loadBalancer) Close() {
	_ = lb.l.Close()
	lb.wg.Wait()
}
