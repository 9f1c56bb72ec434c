package cmdutil

import (
	"crypto/x509"
	"encoding/pem"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ClusterFlags are the connection flags every verb shares: kubectl's own
// (--kubeconfig, --context, -n, --as, --request-timeout, ...) plus the name of
// the ConfigMap that holds the ClusterConfiguration.
type ClusterFlags struct {
	ConfigFlags *genericclioptions.ConfigFlags
	ConfigMap   string
}

// NewClusterFlags returns the flags with kubeadm's defaults.
func NewClusterFlags() *ClusterFlags {
	cf := genericclioptions.NewConfigFlags(false)
	ns := "kube-system"
	cf.Namespace = &ns
	// Accepted for kubectl's sake, but the plugin does no discovery, so it
	// caches nothing; an empty default keeps help the same on every machine.
	noCache := ""
	cf.CacheDir = &noCache
	return &ClusterFlags{ConfigFlags: cf, ConfigMap: "kubeadm-config"}
}

// AddFlags binds the flags to the root command's persistent flag set.
func (f *ClusterFlags) AddFlags(cmd *cobra.Command) {
	f.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&f.ConfigMap, "configmap", f.ConfigMap, "Name of the ConfigMap that holds the ClusterConfiguration")
}

// Namespace is the namespace of the ConfigMaps the plugin works on.
func (f *ClusterFlags) Namespace() string {
	if f.ConfigFlags.Namespace != nil && *f.ConfigFlags.Namespace != "" {
		return *f.ConfigFlags.Namespace
	}
	return "kube-system"
}

// Target is the ClusterConfiguration's ConfigMap and key.
func (f *ClusterFlags) Target(key string) engine.Target {
	return engine.Target{Namespace: f.Namespace(), Name: f.ConfigMap, Key: key}
}

// Clients are what a verb's Complete builds to talk to the cluster.
type Clients struct {
	Client kubernetes.Interface
	// Server is the API server's URL, recorded in backups.
	Server string
	// Clock is the API server's time, read from its responses.
	Clock *engine.ServerClock
	// Config is the REST configuration the client was built from.
	Config *rest.Config
}

// Clients builds the client without discovery: the plugin talks to known
// core and coordination endpoints only.
func (f *ClusterFlags) Clients() (*Clients, error) {
	cfg, err := f.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, exitcode.Failuref("cannot load the kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	// Writers under contention retry quickly; client-side throttling would only
	// add latency on top of the server's own flow control.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "kubectl-kubeadmcfg"
	clock := &engine.ServerClock{Local: LocalNow}
	cfg.Wrap(clock.WrapTransport)
	cfg.Wrap(engine.WrapNoWriteRetries) // every re-sent write is the engine's, which knows it may have landed
	if hook := panicOnFromEnv(); hook != nil {
		cfg.Wrap(hook)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, exitcode.Failuref("cannot build a client: %w", err)
	}
	return &Clients{Client: cs, Server: cfg.Host, Clock: clock, Config: cfg}, nil
}

// CertificateExpiry is when the client certificate the clients
// authenticate with expires; ok is false when they authenticate otherwise
// (a token). A certificate that cannot be read is an error: the client
// could not use it either.
func (c *Clients) CertificateExpiry() (notAfter time.Time, ok bool, err error) {
	data := c.Config.CertData
	if len(data) == 0 && c.Config.CertFile != "" {
		if data, err = input.ReadFile(c.Config.CertFile); err != nil {
			return time.Time{}, false, exitcode.Failuref("cannot read the client certificate: %w", err)
		}
	}
	if len(data) == 0 {
		return time.Time{}, false, nil
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, false, exitcode.Failuref("the client certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, false, exitcode.Failuref("cannot parse the client certificate: %w", err)
	}
	return cert.NotAfter, true, nil
}
