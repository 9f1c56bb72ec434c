package clusterconfig

import (
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The schemas of the kubeadm kinds besides ClusterConfiguration, mirroring
// kubeadm's field names and types so that strict decoding refuses what
// kubeadm refuses. v1beta4 and v1 differ only in the argument type A.

// The kinds a kubeadm config file may hold.
const (
	KindInit    = "InitConfiguration"
	KindJoin    = "JoinConfiguration"
	KindReset   = "ResetConfiguration"
	KindUpgrade = "UpgradeConfiguration"
	KindKubelet = "KubeletConfiguration"
	KindProxy   = "KubeProxyConfiguration"
)

// The component config apiVersions kubeadm reads.
const (
	KubeletAPIVersion = "kubelet.config.k8s.io/v1beta1"
	ProxyAPIVersion   = "kubeproxy.config.k8s.io/v1alpha1"
)

// kubeadmKinds lists the kinds of each kubeadm apiVersion.
func kubeadmKinds(apiVersion string) []string {
	if apiVersion == V1beta3 {
		return []string{KindInit, Kind, KindJoin}
	}
	return []string{KindInit, Kind, KindJoin, KindReset, KindUpgrade}
}

type apiEndpoint struct {
	AdvertiseAddress string `json:"advertiseAddress,omitempty"`
	BindPort         int32  `json:"bindPort,omitempty"`
}

type patches struct {
	Directory string `json:"directory,omitempty"`
}

type timeouts struct {
	ControlPlaneComponentHealthCheck *metav1.Duration `json:"controlPlaneComponentHealthCheck,omitempty"`
	KubeletHealthCheck               *metav1.Duration `json:"kubeletHealthCheck,omitempty"`
	KubernetesAPICall                *metav1.Duration `json:"kubernetesAPICall,omitempty"`
	EtcdAPICall                      *metav1.Duration `json:"etcdAPICall,omitempty"`
	TLSBootstrap                     *metav1.Duration `json:"tlsBootstrap,omitempty"`
	Discovery                        *metav1.Duration `json:"discovery,omitempty"`
	UpgradeManifests                 *metav1.Duration `json:"upgradeManifests,omitempty"`
}

// bootstrapTokenPattern is the form of a bootstrap token, "id.secret".
var bootstrapTokenPattern = lazyregexp.New(`\A([a-z0-9]{6})\.([a-z0-9]{16})\z`)

// bootstrapTokenString is a bootstrap token, which kubeadm checks while
// decoding: a token that is not "id.secret" fails the document's decoding.
type bootstrapTokenString string

// UnmarshalJSON takes the JSON text as kubeadm does: quotes dropped, so a
// number is checked as its digits.
func (t *bootstrapTokenString) UnmarshalJSON(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	token := strings.ReplaceAll(string(b), `"`, "")
	if !bootstrapTokenPattern().MatchString(token) {
		return fmt.Errorf("the bootstrap token %q was not of the form %q", token, bootstrapTokenPattern().String())
	}
	*t = bootstrapTokenString(token)
	return nil
}

type bootstrapToken struct {
	Token       *bootstrapTokenString `json:"token"`
	Description string                `json:"description,omitempty"`
	TTL         *metav1.Duration      `json:"ttl,omitempty"`
	Expires     *metav1.Time          `json:"expires,omitempty"`
	Usages      []string              `json:"usages,omitempty"`
	Groups      []string              `json:"groups,omitempty"`
}

type nodeRegistration[A any] struct {
	Name                  string            `json:"name,omitempty"`
	CRISocket             string            `json:"criSocket,omitempty"`
	Taints                []corev1.Taint    `json:"taints"`
	KubeletExtraArgs      []A               `json:"kubeletExtraArgs,omitempty"`
	IgnorePreflightErrors []string          `json:"ignorePreflightErrors,omitempty"`
	ImagePullPolicy       corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	ImagePullSerial       *bool             `json:"imagePullSerial,omitempty"`
}

type initConfiguration[A any] struct {
	metav1.TypeMeta  `json:",inline"`
	BootstrapTokens  []bootstrapToken    `json:"bootstrapTokens,omitempty"`
	DryRun           bool                `json:"dryRun,omitempty"`
	NodeRegistration nodeRegistration[A] `json:"nodeRegistration,omitempty"`
	LocalAPIEndpoint apiEndpoint         `json:"localAPIEndpoint,omitempty"`
	CertificateKey   string              `json:"certificateKey,omitempty"`
	SkipPhases       []string            `json:"skipPhases,omitempty"`
	Patches          *patches            `json:"patches,omitempty"`
	Timeouts         *timeouts           `json:"timeouts,omitempty"`
}

type joinControlPlane struct {
	LocalAPIEndpoint apiEndpoint `json:"localAPIEndpoint,omitempty"`
	CertificateKey   string      `json:"certificateKey,omitempty"`
}

type tokenDiscovery struct {
	Token                    string   `json:"token"`
	APIServerEndpoint        string   `json:"apiServerEndpoint,omitempty"`
	CACertHashes             []string `json:"caCertHashes,omitempty"`
	UnsafeSkipCAVerification bool     `json:"unsafeSkipCAVerification,omitempty"`
}

type fileDiscovery struct {
	KubeConfigPath string `json:"kubeConfigPath"`
}

type discovery struct {
	BootstrapToken    *tokenDiscovery `json:"bootstrapToken,omitempty"`
	File              *fileDiscovery  `json:"file,omitempty"`
	TLSBootstrapToken string          `json:"tlsBootstrapToken,omitempty"`
}

type joinConfiguration[A any] struct {
	metav1.TypeMeta  `json:",inline"`
	DryRun           bool                `json:"dryRun,omitempty"`
	NodeRegistration nodeRegistration[A] `json:"nodeRegistration,omitempty"`
	CACertPath       string              `json:"caCertPath,omitempty"`
	Discovery        discovery           `json:"discovery"`
	ControlPlane     *joinControlPlane   `json:"controlPlane,omitempty"`
	SkipPhases       []string            `json:"skipPhases,omitempty"`
	Patches          *patches            `json:"patches,omitempty"`
	Timeouts         *timeouts           `json:"timeouts,omitempty"`
}

type resetConfiguration struct {
	metav1.TypeMeta       `json:",inline"`
	CleanupTmpDir         bool      `json:"cleanupTmpDir,omitempty"`
	CertificatesDir       string    `json:"certificatesDir,omitempty"`
	CRISocket             string    `json:"criSocket,omitempty"`
	DryRun                bool      `json:"dryRun,omitempty"`
	Force                 bool      `json:"force,omitempty"`
	IgnorePreflightErrors []string  `json:"ignorePreflightErrors,omitempty"`
	SkipPhases            []string  `json:"skipPhases,omitempty"`
	UnmountFlags          []string  `json:"unmountFlags,omitempty"`
	Timeouts              *timeouts `json:"timeouts,omitempty"`
}

type upgradeApply struct {
	KubernetesVersion         string            `json:"kubernetesVersion,omitempty"`
	AllowExperimentalUpgrades *bool             `json:"allowExperimentalUpgrades,omitempty"`
	AllowRCUpgrades           *bool             `json:"allowRCUpgrades,omitempty"`
	CertificateRenewal        *bool             `json:"certificateRenewal,omitempty"`
	DryRun                    *bool             `json:"dryRun,omitempty"`
	EtcdUpgrade               *bool             `json:"etcdUpgrade,omitempty"`
	ForceUpgrade              *bool             `json:"forceUpgrade,omitempty"`
	IgnorePreflightErrors     []string          `json:"ignorePreflightErrors,omitempty"`
	Patches                   *patches          `json:"patches,omitempty"`
	PrintConfig               *bool             `json:"printConfig,omitempty"`
	SkipPhases                []string          `json:"skipPhases,omitempty"`
	ImagePullPolicy           corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	ImagePullSerial           *bool             `json:"imagePullSerial,omitempty"`
}

type upgradeDiff struct {
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	DiffContextLines  int    `json:"contextLines,omitempty"`
}

type upgradeNode struct {
	CertificateRenewal    *bool             `json:"certificateRenewal,omitempty"`
	DryRun                *bool             `json:"dryRun,omitempty"`
	EtcdUpgrade           *bool             `json:"etcdUpgrade,omitempty"`
	IgnorePreflightErrors []string          `json:"ignorePreflightErrors,omitempty"`
	SkipPhases            []string          `json:"skipPhases,omitempty"`
	Patches               *patches          `json:"patches,omitempty"`
	ImagePullPolicy       corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	ImagePullSerial       *bool             `json:"imagePullSerial,omitempty"`
}

type upgradePlan struct {
	KubernetesVersion         string   `json:"kubernetesVersion,omitempty"`
	AllowExperimentalUpgrades *bool    `json:"allowExperimentalUpgrades,omitempty"`
	AllowRCUpgrades           *bool    `json:"allowRCUpgrades,omitempty"`
	DryRun                    *bool    `json:"dryRun,omitempty"`
	EtcdUpgrade               *bool    `json:"etcdUpgrade,omitempty"`
	IgnorePreflightErrors     []string `json:"ignorePreflightErrors,omitempty"`
	PrintConfig               *bool    `json:"printConfig,omitempty"`
}

type upgradeConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	Apply           upgradeApply `json:"apply,omitempty"`
	Diff            upgradeDiff  `json:"diff,omitempty"`
	Node            upgradeNode  `json:"node,omitempty"`
	Plan            upgradePlan  `json:"plan,omitempty"`
	Timeouts        *timeouts    `json:"timeouts,omitempty"`
}

// The v1beta3 kinds: kubeletExtraArgs is a map, and there are no dryRun,
// timeouts or imagePullSerial; discovery has its own timeout.

type nodeRegistrationV1beta3 struct {
	Name                  string            `json:"name,omitempty"`
	CRISocket             string            `json:"criSocket,omitempty"`
	Taints                []corev1.Taint    `json:"taints"`
	KubeletExtraArgs      map[string]string `json:"kubeletExtraArgs,omitempty"`
	IgnorePreflightErrors []string          `json:"ignorePreflightErrors,omitempty"`
	ImagePullPolicy       corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

type initConfigurationV1beta3 struct {
	metav1.TypeMeta  `json:",inline"`
	BootstrapTokens  []bootstrapToken        `json:"bootstrapTokens,omitempty"`
	NodeRegistration nodeRegistrationV1beta3 `json:"nodeRegistration,omitempty"`
	LocalAPIEndpoint apiEndpoint             `json:"localAPIEndpoint,omitempty"`
	CertificateKey   string                  `json:"certificateKey,omitempty"`
	SkipPhases       []string                `json:"skipPhases,omitempty"`
	Patches          *patches                `json:"patches,omitempty"`
}

type discoveryV1beta3 struct {
	discovery `json:",inline"`
	Timeout   *metav1.Duration `json:"timeout,omitempty"`
}

type joinConfigurationV1beta3 struct {
	metav1.TypeMeta  `json:",inline"`
	NodeRegistration nodeRegistrationV1beta3 `json:"nodeRegistration,omitempty"`
	CACertPath       string                  `json:"caCertPath,omitempty"`
	Discovery        discoveryV1beta3        `json:"discovery"`
	ControlPlane     *joinControlPlane       `json:"controlPlane,omitempty"`
	SkipPhases       []string                `json:"skipPhases,omitempty"`
	Patches          *patches                `json:"patches,omitempty"`
}

// decodeInit decodes an InitConfiguration of any apiVersion into one shape.
func decodeInit(js []byte, apiVersion string, r *Report) (*initSpec, error) {
	switch apiVersion {
	case V1beta3:
		c, err := strictInto[initConfigurationV1beta3](js, r)
		if err != nil {
			return nil, err
		}
		return &initSpec{c.BootstrapTokens, nodeRegFromV1beta3(c.NodeRegistration), c.LocalAPIEndpoint, c.CertificateKey}, nil
	case V1:
		c, err := strictInto[initConfiguration[argV1]](js, r)
		if err != nil {
			return nil, err
		}
		return &initSpec{c.BootstrapTokens, nodeRegFromNew(c.NodeRegistration, identityArg), c.LocalAPIEndpoint, c.CertificateKey}, nil
	default:
		c, err := strictInto[initConfiguration[argV1beta4]](js, r)
		if err != nil {
			return nil, err
		}
		return &initSpec{c.BootstrapTokens, nodeRegFromNew(c.NodeRegistration, fromArgV1beta4), c.LocalAPIEndpoint, c.CertificateKey}, nil
	}
}

// decodeJoin decodes a JoinConfiguration of any apiVersion into one shape.
func decodeJoin(js []byte, apiVersion string, r *Report) (*joinSpec, error) {
	switch apiVersion {
	case V1beta3:
		c, err := strictInto[joinConfigurationV1beta3](js, r)
		if err != nil {
			return nil, err
		}
		return &joinSpec{nodeRegFromV1beta3(c.NodeRegistration), c.CACertPath, c.Discovery.discovery, c.ControlPlane}, nil
	case V1:
		c, err := strictInto[joinConfiguration[argV1]](js, r)
		if err != nil {
			return nil, err
		}
		return &joinSpec{nodeRegFromNew(c.NodeRegistration, identityArg), c.CACertPath, c.Discovery, c.ControlPlane}, nil
	default:
		c, err := strictInto[joinConfiguration[argV1beta4]](js, r)
		if err != nil {
			return nil, err
		}
		return &joinSpec{nodeRegFromNew(c.NodeRegistration, fromArgV1beta4), c.CACertPath, c.Discovery, c.ControlPlane}, nil
	}
}
