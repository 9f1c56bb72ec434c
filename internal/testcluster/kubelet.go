package testcluster

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The runner's kubelet side besides the static Pods: the kubelet's version,
// which the Node reports (status.nodeInfo.kubeletVersion), and its /healthz
// endpoint, at the address the node's /var/lib/kubelet/config.yaml gives
// (healthzBindAddress, healthzPort), as the kubelet serves it. Both change
// when the node's kubelet restart command (noderoot.go) asks for a restart:
// the stand-in stops serving, reads config.yaml again, and comes back as
// the version asked for. A config.yaml it cannot read leaves it down, as a
// kubelet that exits at start: no /healthz and no Node heartbeats (the
// node-lifecycle controller then marks the Node NotReady), while the static
// Pods run on, as containers do while their kubelet is down. The next
// restart tries again.

// kubeletState is owned by the runner's status loop.
type kubeletState struct {
	version string
	// down says why the kubelet is not running ("" while it runs).
	down    string
	healthz *http.Server
	// handled is the last restart request taken.
	handled string
}

// startKubelet starts the kubelet stand-in as version.
func (r *Runner) startKubelet(version string) {
	r.kubelet.version = version
	cfg, err := readKubeletConfig(r.opts.Root)
	if err != nil {
		r.kubelet.down = err.Error()
		r.opts.Log("%s: the kubelet %s exited at start: %v", r.opts.Node, version, err)
		return
	}
	r.kubelet.down = ""
	if *cfg.HealthzPort == 0 {
		return
	}
	addr := net.JoinHostPort(cfg.HealthzBindAddress, fmt.Sprint(*cfg.HealthzPort))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		// The kubelet logs it and runs on without /healthz.
		r.opts.Log("%s: the kubelet %s cannot serve /healthz on %s: %v", r.opts.Node, version, addr, err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	r.kubelet.healthz = srv
}

// stopKubelet stops serving /healthz.
func (r *Runner) stopKubelet() {
	if r.kubelet.healthz != nil {
		_ = r.kubelet.healthz.Close()
		r.kubelet.healthz = nil
	}
}

// kubeletDir is the harness's directory of the kubelet stand-in's restart
// requests (restart) and answers (restarted), in the node's root.
func (r *Runner) kubeletDir() string {
	return filepath.Join(r.opts.Root, harnessDir, "kubelet")
}

// syncKubelet takes a restart request the restart command left ("ID
// VERSION"), restarts, and answers "ID RESULT".
func (r *Runner) syncKubelet() {
	data, err := os.ReadFile(filepath.Join(r.kubeletDir(), "restart"))
	if err != nil {
		return
	}
	id, version, ok := strings.Cut(strings.TrimSpace(string(data)), " ")
	if !ok || id == r.kubelet.handled {
		return
	}
	r.kubelet.handled = id
	r.opts.Log("%s: restarting the kubelet %s as %s", r.opts.Node, r.kubelet.version, version)
	r.stopKubelet()
	r.startKubelet(version)
	// The next status round reports the new version at once.
	r.heartbeat = time.Time{}
	result := "restarted as kubelet " + version
	if r.kubelet.down != "" {
		result = fmt.Sprintf("started kubelet %s, which exited: %s", version, r.kubelet.down)
	}
	if err := writeAtomically(filepath.Join(r.kubeletDir(), "restarted"), []byte(id+" "+result+"\n")); err != nil {
		r.opts.Log("%s: answer the kubelet restart: %v", r.opts.Node, err)
	}
}

// writeAtomically writes a file whole, never half: a temporary file
// renamed over it.
func writeAtomically(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // read by the restart command
		return err
	}
	return os.Rename(tmp, path)
}
