package testcluster

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FaultProxy is a TLS-terminating reverse proxy in front of the API server
// that loses answers on purpose: it forwards a write, lets it commit, and
// drops the connection instead of relaying the answer, or answers 503 with
// Retry-After instead; or drops a write before it reaches the server; or
// closes a watch before its first event; or answers everything with a
// proxy's HTML error page; or refuses every connection. Other reads pass
// through. It listens on 127.0.0.1 only.
type FaultProxy struct {
	// URL is where the proxy listens.
	URL string
	// Kubeconfig has the contexts AdminContext and UnprivilegedContext, both
	// through the proxy.
	Kubeconfig string

	server *http.Server
	mu     sync.Mutex
	faults Faults
	lost   []LostWrite
	// faulted and closed count the writes and watches the faults were
	// applied to since SetFaults.
	faulted, closed int
	closedTotal     int
}

// Faults say what the proxy does to the requests it sees.
type Faults struct {
	// LoseAnswer is the fraction of writes to ConfigMaps forwarded to the
	// server whose answer is then dropped with the connection.
	LoseAnswer float64
	// LoseRequest is the fraction of writes to ConfigMaps dropped with the
	// connection before they reach the server.
	LoseRequest float64
	// Unavailable is the fraction of writes to ConfigMaps forwarded to the
	// server whose answer is then replaced by a 503 page with Retry-After,
	// as a load balancer answers that gave up waiting for its backend.
	Unavailable float64
	// MaxWrites, when not 0, is how many writes the three faults above are
	// applied to; the writes after them pass through.
	MaxWrites int
	// Meanwhile, when set, runs after the server answered a write whose
	// answer the proxy then drops or replaces, before the client hears
	// anything: another writer gets in before the client can look.
	Meanwhile func()
	// CloseWatches is how many of the next watches on ConfigMaps the proxy
	// closes once the server accepted them, before their first event: a
	// connection that broke, as at an API server restart or a proxy's idle
	// timeout.
	CloseWatches int
	// Blackout drops every connection (after TLS), as a server that went
	// away.
	Blackout bool
	// HTMLStatus, when not 0, answers every request with an HTML page of
	// this status, as a proxy or load balancer in front of a cluster does.
	HTMLStatus int
}

// LostWrite is a write whose answer the proxy dropped.
type LostWrite struct {
	Method string
	Path   string
	// WriteID is the write's kubeadmcfg.io/write-id annotation, if any.
	WriteID string
	// Landed is true when the server committed the write (its answer was
	// 2xx) before the proxy dropped the answer.
	Landed bool
	// Status is what the proxy answered instead of the server's answer; 0
	// when it dropped the connection.
	Status int
}

// writeIDAnnotation is the annotation the plugin's engine puts on every
// write (engine.WriteIDAnnotation; spelled out to keep the harness free of
// the code under test).
const writeIDAnnotation = "kubeadmcfg.io/write-id"

// StartFaultProxy starts a proxy in front of the cluster's API server, with
// no faults until SetFaults.
func (c *Cluster) StartFaultProxy() (*FaultProxy, error) {
	backend, err := url.Parse(c.URL)
	if err != nil {
		return nil, err
	}
	kcfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(kcfg.Clusters["local"].CertificateAuthorityData)
	forward := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: false}

	cert, certPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{URL: "https://" + l.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(backend)
	rp.Transport = forward
	rp.FlushInterval = -1 // watches stream
	p.server = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, rp, forward, backend) }),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1 only, so a connection can be hijacked
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.server.ServeTLS(l, "", "") }()

	cfg := kcfg.DeepCopy()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: certPEM}
	p.Kubeconfig = filepath.Join(c.Dir, fmt.Sprintf("kubeconfig-proxy-%d", l.Addr().(*net.TCPAddr).Port))
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// SetFaults changes what the proxy does from now on.
func (p *FaultProxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults, p.faulted, p.closed = f, 0, 0
}

// ClosedWatches returns how many watches the proxy closed so far.
func (p *FaultProxy) ClosedWatches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closedTotal
}

// take reports whether one more write may be faulted, and counts it.
func (p *FaultProxy) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.faults.MaxWrites != 0 && p.faulted >= p.faults.MaxWrites {
		return false
	}
	p.faulted++
	return true
}

// takeWatch reports whether the watch r is to be closed, and counts it.
func (p *FaultProxy) takeWatch(r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/configmaps") {
		return false
	}
	if w := r.URL.Query().Get("watch"); w != "true" && w != "1" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed >= p.faults.CloseWatches {
		return false
	}
	p.closed++
	return true
}

// Lost returns the writes whose answer the proxy dropped or replaced so far.
func (p *FaultProxy) Lost() []LostWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]LostWrite{}, p.lost...)
}

// Stop closes the proxy.
func (p *FaultProxy) Stop() { _ = p.server.Close() }

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy, forward http.RoundTripper, backend *url.URL) {
	p.mu.Lock()
	f := p.faults
	p.mu.Unlock()
	switch {
	case f.Blackout:
		hangUp(w)
		return
	case f.HTMLStatus != 0:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.HTMLStatus)
		fmt.Fprintf(w, "<html><body><h1>%d %s</h1><p>proxy</p></body></html>\n", f.HTMLStatus, http.StatusText(f.HTMLStatus))
		return
	}
	if p.takeWatch(r) {
		p.closeWatch(w, r, forward, backend)
		return
	}
	write := r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/configmaps")
	if !write || (f.LoseAnswer == 0 && f.LoseRequest == 0 && f.Unavailable == 0) {
		rp.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		hangUp(w)
		return
	}
	record := LostWrite{Method: r.Method, Path: r.URL.Path, WriteID: writeID(body)}
	roll := mrand.Float64() //nolint:gosec // fault injection, no secret
	faulted := roll < f.LoseRequest+f.LoseAnswer+f.Unavailable && p.take()
	if faulted && roll < f.LoseRequest {
		p.remember(record)
		hangUp(w)
		return
	}
	resp, err := forward.RoundTrip(outgoing(r, backend, body))
	if err != nil {
		hangUp(w)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if faulted {
		record.Landed = resp.StatusCode/100 == 2
		if f.Meanwhile != nil {
			f.Meanwhile()
		}
		if roll >= f.LoseRequest+f.LoseAnswer {
			record.Status = http.StatusServiceUnavailable
			p.remember(record)
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "<html><body><h1>503 Service Unavailable</h1><p>proxy: the backend took too long</p></body></html>\n")
			return
		}
		p.remember(record)
		hangUp(w) // committed (or refused) on the server; the answer is lost
		return
	}
	relay(w, resp, answer)
}

// outgoing is r, with body, addressed to the backend.
func outgoing(r *http.Request, backend *url.URL, body []byte) *http.Request {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = backend.Scheme, backend.Host, backend.Host
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
	}
	return out
}

// relay sends the server's answer on to the client.
func relay(w http.ResponseWriter, resp *http.Response, answer []byte) {
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// closeWatch forwards the watch r and, once the server accepted it, sends
// the client the server's headers and drops the connection before the first
// event. A watch the server refused is answered as the server answered.
func (p *FaultProxy) closeWatch(w http.ResponseWriter, r *http.Request, forward http.RoundTripper, backend *url.URL) {
	resp, err := forward.RoundTrip(outgoing(r, backend, nil))
	if err != nil {
		hangUp(w)
		return
	}
	if resp.StatusCode != http.StatusOK {
		p.mu.Lock()
		p.closed-- // not closed: the next watch is
		p.mu.Unlock()
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		relay(w, resp, answer)
		return
	}
	_ = resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	p.mu.Lock()
	p.closedTotal++
	p.mu.Unlock()
	hangUp(w)
}

func (p *FaultProxy) remember(l LostWrite) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lost = append(p.lost, l)
}

// hangUp drops the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if h, ok := w.(http.Hijacker); ok {
		if conn, _, err := h.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // closes the connection without an answer
}

// writeID reads the write-id annotation from a ConfigMap as the client sent
// it, in JSON or protobuf.
func writeID(body []byte) string {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return ""
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		return cm.Annotations[writeIDAnnotation]
	}
	return ""
}

// selfSigned makes a serving certificate for 127.0.0.1.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "kubeadmcfg fault proxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return cert, certPEM, err
}
