package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A TLS etcd cluster of several members on loopback, with certificates laid
// out as kubeadm lays them out in its certificatesDir, for tests of what
// talks to a stacked etcd with the node's client certificate: quorum
// checks, member restarts, snapshots. It runs the real etcd; no API server.

// TLSEtcdOptions tune StartTLSEtcd.
type TLSEtcdOptions struct {
	// Members is the cluster's size (1 to 5).
	Members int
	// Dir holds the pki, the data directories and the logs. Empty means a
	// new temporary directory that Stop removes.
	Dir string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// TLSEtcd is a running TLS etcd cluster.
type TLSEtcd struct {
	Dir string
	// PKI is a kubeadm certificatesDir: etcd/ca.{crt,key},
	// etcd/{server,peer,healthcheck-client}.{crt,key} and
	// apiserver-etcd-client.{crt,key}, valid for 127.0.0.1 and localhost.
	PKI     string
	Members []*TLSEtcdMember

	bin    string
	ownDir bool
	log    func(format string, args ...any)
}

// TLSEtcdMember is one member, named cp-N after the node it stands for.
type TLSEtcdMember struct {
	Name      string
	ClientURL string
	PeerURL   string
	DataDir   string
	// Args are the flags it was last started with.
	Args []string

	proc *proc
}

// StartTLSEtcd writes the pki and starts a cluster of opts.Members members
// of etcdBin, as a new cluster, and returns once every member reports
// itself healthy.
func StartTLSEtcd(ctx context.Context, etcdBin string, opts TLSEtcdOptions) (*TLSEtcd, error) {
	if opts.Members < 1 || opts.Members > 5 {
		return nil, fmt.Errorf("a TLS etcd cluster has 1 to 5 members, not %d", opts.Members)
	}
	e := &TLSEtcd{Dir: opts.Dir, bin: etcdBin, log: opts.Log}
	if e.log == nil {
		e.log = func(string, ...any) {}
	}
	if e.Dir == "" {
		dir, err := os.MkdirTemp("", "kubeadmcfg-etcd-")
		if err != nil {
			return nil, err
		}
		e.Dir, e.ownDir = dir, true
	}
	e.PKI = filepath.Join(e.Dir, "pki")
	if err := WriteEtcdPKI(e.PKI); err != nil {
		e.Stop()
		return nil, err
	}
	ports, err := freePorts(2 * opts.Members)
	if err != nil {
		e.Stop()
		return nil, err
	}
	var initial []string
	for i := range opts.Members {
		m := &TLSEtcdMember{
			Name:      fmt.Sprintf("cp-%d", i),
			ClientURL: fmt.Sprintf("https://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("https://127.0.0.1:%d", ports[2*i+1]),
		}
		m.DataDir = filepath.Join(e.Dir, m.Name)
		initial = append(initial, m.Name+"="+m.PeerURL)
		e.Members = append(e.Members, m)
	}
	for _, m := range e.Members {
		m.Args = e.flags(m, strings.Join(initial, ","))
		if err := e.start(m); err != nil {
			e.Stop()
			return nil, err
		}
	}
	if err := e.WaitHealthy(ctx, 60*time.Second); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// flags are what kubeadm's etcd manifest gives a member, on loopback.
func (e *TLSEtcd) flags(m *TLSEtcdMember, initialCluster string) []string {
	pki := func(name string) string { return filepath.Join(e.PKI, "etcd", name) }
	return []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=new",
		"--cert-file=" + pki("server.crt"),
		"--key-file=" + pki("server.key"),
		"--client-cert-auth=true",
		"--trusted-ca-file=" + pki("ca.crt"),
		"--peer-cert-file=" + pki("peer.crt"),
		"--peer-key-file=" + pki("peer.key"),
		"--peer-client-cert-auth=true",
		"--peer-trusted-ca-file=" + pki("ca.crt"),
		"--snapshot-count=10000",
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

// ClientURLs are every member's client URL.
func (e *TLSEtcd) ClientURLs() []string {
	var urls []string
	for _, m := range e.Members {
		urls = append(urls, m.ClientURL)
	}
	return urls
}

// start runs a member with m.Args, its output appended to Dir/NAME.log.
func (e *TLSEtcd) start(m *TLSEtcdMember) error {
	logFile, err := os.OpenFile(filepath.Join(e.Dir, m.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s starting: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(m.Args, " "))
	cmd := exec.Command(e.bin, m.Args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Dies with the test; its own process group, as in Cluster.run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd member %s: %w", m.Name, err)
	}
	p := &proc{name: m.Name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	m.proc = p
	e.log("started etcd member %s on %s", m.Name, m.ClientURL)
	return nil
}

// Kill ends member i with SIGKILL, as a crash would, and waits until it is
// gone.
func (e *TLSEtcd) Kill(i int) {
	m := e.Members[i]
	if m.proc == nil {
		return
	}
	_ = m.proc.cmd.Process.Kill()
	<-m.proc.done
	m.proc = nil
}

// stop ends member i with SIGTERM, as the kubelet does, and waits.
func (e *TLSEtcd) stop(i int) {
	m := e.Members[i]
	if m.proc == nil {
		return
	}
	_ = m.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.proc.done:
	case <-time.After(10 * time.Second):
		_ = m.proc.cmd.Process.Kill()
		<-m.proc.done
	}
	m.proc = nil
}

// Restart stops member i as the kubelet does for a changed manifest and
// starts it again on the same data directory, with flags replacing those of
// the same name (--snapshot-count=12345). It does not wait for the member:
// what comes back, and when, is for the test to find out.
func (e *TLSEtcd) Restart(i int, flags ...string) error {
	e.stop(i)
	m := e.Members[i]
	m.Args = withFlags(m.Args, flags)
	return e.start(m)
}

// Running reports whether member i's process has not exited.
func (e *TLSEtcd) Running(i int) bool {
	m := e.Members[i]
	if m.proc == nil {
		return false
	}
	select {
	case <-m.proc.done:
		return false
	default:
		return true
	}
}

// withFlags replaces the flags of args named in flags, and appends the rest.
func withFlags(args, flags []string) []string {
	out := append([]string{}, args...)
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		replaced := false
		for i, a := range out {
			if n, _, _ := strings.Cut(a, "="); n == name {
				out[i], replaced = f, true
			}
		}
		if !replaced {
			out = append(out, f)
		}
	}
	return out
}

// WaitHealthy waits until every running member's /health says true, as
// etcd answers it with the health-check client certificate.
func (e *TLSEtcd) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(e.PKI, "etcd", "healthcheck-client.crt"), filepath.Join(e.PKI, "etcd", "healthcheck-client.key"))
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(e.PKI, "etcd", "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		last := ""
		for i, m := range e.Members {
			if !e.Running(i) {
				continue
			}
			if err := health(ctx, client, m.ClientURL); err != nil {
				last = fmt.Sprintf("%s: %v", m.Name, err)
				break
			}
		}
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not healthy within %s (%s); logs in %s", timeout, last, e.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func health(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("health %q %s", h.Health, h.Reason)
	}
	return nil
}

// Stop ends every member and removes the directory if StartTLSEtcd made it.
func (e *TLSEtcd) Stop() {
	for i := range e.Members {
		e.stop(i)
	}
	if e.ownDir {
		_ = os.RemoveAll(e.Dir)
	}
}
