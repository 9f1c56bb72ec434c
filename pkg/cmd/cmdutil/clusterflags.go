package cmdutil

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ClusterFlags are the connection flags every verb shares: kubectl's own
// (--kubeconfig, --context, -n, --as, --request-timeout, ...) plus the name of
// the ConfigMap that holds the ClusterConfiguration.
//
// They are bound with client-go's clientcmd, as kubectl's ConfigFlags bind
// them, under the same names, shorthands and help. ConfigFlags itself is
// not used: its package links cli-runtime's resource builder and with it
// all of kustomize, which no verb of the plugin reads files through.
type ClusterFlags struct {
	Loading   *clientcmd.ClientConfigLoadingRules
	Overrides *clientcmd.ConfigOverrides
	ConfigMap string
	// userExtra is --as-user-extra, key=value pairs, which clientcmd has no
	// flag for.
	userExtra []string
	// cacheDir is --cache-dir, accepted for kubectl's sake: the plugin does
	// no discovery, so it caches nothing.
	cacheDir string
}

// NewClusterFlags returns the flags with kubeadm's defaults.
func NewClusterFlags() *ClusterFlags {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	// kubectl's defaults for a missing kubeconfig, as ConfigFlags sets them.
	loading.DefaultClientConfig = &clientcmd.DefaultClientConfig
	return &ClusterFlags{
		Loading:   loading,
		Overrides: &clientcmd.ConfigOverrides{ClusterDefaults: clientcmd.ClusterDefaults},
		ConfigMap: "kubeadm-config",
	}
}

// overrideFlags are kubectl's names, shorthands and help for the
// connection flags (cli-runtime's ConfigFlags), where clientcmd's
// recommended ones differ; --username and --password are left out, as
// kubectl leaves them out.
func overrideFlags() clientcmd.ConfigOverrideFlags {
	f := clientcmd.RecommendedConfigOverrideFlags("")
	f.AuthOverrideFlags.Impersonate.Description = "Username to impersonate for the operation. User could be a regular user or a service account in a namespace."
	f.AuthOverrideFlags.ImpersonateUID.Description = "UID to impersonate for the operation."
	f.AuthOverrideFlags.Username = clientcmd.FlagInfo{}
	f.AuthOverrideFlags.Password = clientcmd.FlagInfo{}
	f.ClusterOverrideFlags.APIServer.ShortName = "s"
	f.ClusterOverrideFlags.TLSServerName.Description = "Server name to use for server certificate validation. If it is not provided, the hostname used to contact the server is used"
	f.ClusterOverrideFlags.ProxyURL.Description = "Proxy URL to use for requests to the API server"
	f.ContextOverrideFlags.Namespace.Default = "kube-system"
	f.ContextOverrideFlags.Namespace.Description = "If present, the namespace scope for this CLI request"
	return f
}

// AddFlags binds the flags to the root command's persistent flag set.
func (f *ClusterFlags) AddFlags(cmd *cobra.Command) {
	flags := cmd.PersistentFlags()
	flags.StringVar(&f.Loading.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file to use for CLI requests.")
	flags.StringVar(&f.cacheDir, "cache-dir", "", "Default cache directory")
	clientcmd.BindOverrideFlags(f.Overrides, flags, overrideFlags())
	flags.StringArrayVar(&f.userExtra, "as-user-extra", nil, "User extras to impersonate for the operation, this flag can be repeated to specify multiple values for the same key.")
	flags.StringVar(&f.ConfigMap, "configmap", f.ConfigMap, "Name of the ConfigMap that holds the ClusterConfiguration")
}

// RESTConfig is the REST configuration the flags and the kubeconfig
// describe, as kubectl builds it (a kubeconfig, or the in-cluster
// configuration in a Pod); it never prompts.
func (f *ClusterFlags) RESTConfig() (*rest.Config, error) {
	overrides := *f.Overrides
	for _, kv := range f.userExtra {
		key, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue // as kubectl does
		}
		if overrides.AuthInfo.ImpersonateUserExtra == nil {
			overrides.AuthInfo.ImpersonateUserExtra = map[string][]string{}
		}
		overrides.AuthInfo.ImpersonateUserExtra[key] = append(overrides.AuthInfo.ImpersonateUserExtra[key], value)
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(f.Loading, &overrides).ClientConfig()
}

// Namespace is the namespace of the ConfigMaps the plugin works on.
func (f *ClusterFlags) Namespace() string {
	if ns := f.Overrides.Context.Namespace; ns != "" {
		return ns
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
	cfg, err := f.RESTConfig()
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
