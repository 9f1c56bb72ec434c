package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	nodeagent "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// DefaultMetricsBindAddress is where an agent serves its metrics unless
// told otherwise: the node's loopback, so that nothing is exposed that the
// operator did not ask for, on a port no Kubernetes component, etcd or
// common node agent uses (the kubelet and the control plane take
// 10248-10259, etcd 2379-2381, node-problem-detector 20256-20257, and the
// exporters' own range 9100-9999 is taken whole).
const DefaultMetricsBindAddress = "127.0.0.1:10268"

// validateBindAddress checks --metrics-bind-address without I/O.
func validateBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || n == 0 {
		return exitcode.Usagef("--metrics-bind-address must be HOST:PORT with a port of 1-65535 (or 0 to serve no metrics), not %q", addr)
	}
	return nil
}

// serveMetrics serves h on addr's /metrics until stop is called; "0"
// serves nothing. An address that cannot be bound fails the agent before
// it starts (exit 1): a monitor that finds no metrics would take the node
// for down. A server that fails later is logged.
func serveMetrics(addr string, h http.Handler, log func(nodeagent.Event)) (stop func(), err error) {
	if addr == "0" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, exitcode.Failuref("cannot serve metrics on --metrics-bind-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	served := crash.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil {
			log(nodeagent.Event{Time: time.Now(), Warning: true, Reason: "MetricsFailed", Message: "serving metrics: " + exitcode.Message(err)})
		}
	}, nil
}
