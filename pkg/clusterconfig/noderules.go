package clusterconfig

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// kubeadm's checks of the per-node kinds (InitConfiguration,
// JoinConfiguration, ResetConfiguration, UpgradeConfiguration), after its
// static defaults. Where kubeadm fills a value in from the host it runs on
// (the node name, the advertise address), the plugin cannot know the node's
// value and warns instead.

// nodeReg is nodeRegistration of any apiVersion in one shape.
type nodeReg struct {
	name, criSocket string
	args            []argV1
	pullPolicy      corev1.PullPolicy
}

func nodeRegFromNew[A any](n nodeRegistration[A], conv func(A) argV1) nodeReg {
	args := make([]argV1, 0, len(n.KubeletExtraArgs))
	for _, a := range n.KubeletExtraArgs {
		args = append(args, conv(a))
	}
	return nodeReg{name: n.Name, criSocket: n.CRISocket, args: args, pullPolicy: n.ImagePullPolicy}
}

func nodeRegFromV1beta3(n nodeRegistrationV1beta3) nodeReg {
	args := make([]argV1, 0, len(n.KubeletExtraArgs))
	for k, v := range n.KubeletExtraArgs {
		args = append(args, argV1{Name: k, Value: v})
	}
	slices.SortFunc(args, func(a, b argV1) int { return strings.Compare(a.Name, b.Name) })
	return nodeReg{name: n.Name, criSocket: n.CRISocket, args: args, pullPolicy: n.ImagePullPolicy}
}

func (n nodeReg) validate(p *field.Path, mergeMethods bool, r *Report) field.ErrorList {
	var errs field.ErrorList
	// kubeadm trims and lowercases the name, and takes the host's name when
	// there is none.
	name := strings.ToLower(strings.TrimSpace(n.name))
	switch {
	case n.name == "":
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: no name: kubeadm takes the host name of the node it runs on, which must be a valid DNS subdomain", p))
	case name == "":
		errs = append(errs, field.Invalid(p.Child("name"), n.name, "empty hostname is invalid"))
	default:
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(p.Child("name"), name, msg))
		}
	}
	errs = append(errs, validateCRISocket(n.criSocket, p.Child("criSocket"))...)
	errs = append(errs, validateArgs(n.args, p.Child("kubeletExtraArgs"), mergeMethods)...)
	return append(errs, validatePullPolicy(n.pullPolicy, p.Child("imagePullPolicy"))...)
}

// validateCRISocket checks a CRI endpoint as kubeadm does once it has put
// "unix://" before a value that does not start with "unix". Empty is kubeadm's
// default socket.
func validateCRISocket(socket string, p *field.Path) field.ErrorList {
	if socket == "" {
		return nil
	}
	if !strings.HasPrefix(socket, "unix") {
		socket = "unix://" + socket
	}
	u, err := url.Parse(socket)
	if err != nil {
		return field.ErrorList{field.Invalid(p, socket, fmt.Sprintf("URL parsing error: %v", err))}
	}
	if u.Scheme != "unix" {
		return field.ErrorList{field.Invalid(p, socket, fmt.Sprintf("only URL scheme %q is supported, got %q", "unix", u.Scheme))}
	}
	return nil
}

func validatePullPolicy(policy corev1.PullPolicy, p *field.Path) field.ErrorList {
	switch policy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return nil
	}
	return field.ErrorList{field.NotSupported(p, policy, []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever})}
}

// validateAPIEndpoint checks a node's API server endpoint. An empty address
// is the host's; a loopback one makes kubeadm look for a global address on
// the lo interface, which hosts do not have unless routed so on purpose.
func validateAPIEndpoint(ep apiEndpoint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a := ep.AdvertiseAddress; a != "" {
		switch ip := netutils.ParseIPSloppy(a); {
		case ip == nil:
			errs = append(errs, field.Invalid(p.Child("advertiseAddress"), a, "must be an IPv4 or IPv6 address"))
		case ip.IsLoopback():
			errs = append(errs, field.Invalid(p.Child("advertiseAddress"), a,
				"a loopback address makes kubeadm use a global address of the lo interface, which hosts normally lack"))
		}
	}
	if ep.BindPort != 0 { // 0 is kubeadm's default, 6443
		if _, err := parsePort(fmt.Sprint(ep.BindPort)); err != nil {
			errs = append(errs, field.Invalid(p.Child("bindPort"), ep.BindPort, "port number is not valid"))
		}
	}
	return errs
}

// validateCertificateKey checks the key that encrypts uploaded certificates:
// hex, 32 bytes (AES-256).
func validateCertificateKey(key string, p *field.Path) field.ErrorList {
	if key == "" {
		return nil
	}
	decoded, err := hex.DecodeString(key)
	if err != nil {
		return field.ErrorList{field.Invalid(p, key, fmt.Sprintf("certificate key decoding error: %v", err))}
	}
	if len(decoded) != 32 {
		return field.ErrorList{field.Invalid(p, key, fmt.Sprintf("invalid certificate key size %d, the key must be an AES key of size 32", len(decoded)))}
	}
	return nil
}

var (
	tokenUsages    = []string{"signing", "authentication"}
	bootstrapGroup = lazyregexp.New(`\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`)
)

func validateBootstrapTokens(tokens []bootstrapToken, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tokens {
		tp := p.Index(i)
		usages := t.Usages
		if len(usages) == 0 {
			usages = tokenUsages // kubeadm's default
		}
		for _, u := range usages {
			if !slices.Contains(tokenUsages, u) {
				errs = append(errs, field.NotSupported(tp.Child("usages"), u, tokenUsages))
			}
		}
		if len(t.Groups) > 0 && !slices.Contains(usages, "authentication") {
			errs = append(errs, field.Invalid(tp.Child("groups"), t.Groups, `token groups cannot be specified unless usages includes "authentication"`))
		}
		for _, g := range t.Groups {
			if !bootstrapGroup().MatchString(g) {
				errs = append(errs, field.Invalid(tp.Child("groups"), g, "must match "+bootstrapGroup().String()))
			}
		}
		if t.Expires != nil { // kubeadm gives ttl a default before it checks
			errs = append(errs, field.Invalid(tp, "", "ttl and expires are mutually exclusive, and kubeadm defaults ttl to 24h: set ttl only"))
		}
	}
	return errs
}

func validateToken(token string, p *field.Path) field.ErrorList {
	if bootstrapTokenPattern().MatchString(token) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, token, "the bootstrap token is invalid")}
}

func (d discovery) validate(p *field.Path, r *Report) field.ErrorList {
	var errs field.ErrorList
	tls := d.TLSBootstrapToken
	if tls == "" && d.BootstrapToken != nil {
		tls = d.BootstrapToken.Token // kubeadm's default
	}
	switch {
	case d.BootstrapToken == nil && d.File == nil:
		errs = append(errs, field.Invalid(p, "", "bootstrapToken or file must be set"))
	case d.BootstrapToken != nil && d.File != nil:
		errs = append(errs, field.Invalid(p, "", "bootstrapToken and file cannot both be set"))
	}
	if b := d.BootstrapToken; b != nil {
		bp := p.Child("bootstrapToken")
		if b.APIServerEndpoint == "" {
			errs = append(errs, field.Required(bp.Child("apiServerEndpoint"), "APIServerEndpoint is not set"))
		}
		if len(b.CACertHashes) == 0 && !b.UnsafeSkipCAVerification {
			errs = append(errs, field.Invalid(bp.Child("caCertHashes"), "", "using token-based discovery without caCertHashes can be unsafe: set unsafeSkipCAVerification to skip the check"))
		}
		errs = append(errs, validateToken(b.Token, bp.Child("token"))...)
		if _, _, err := net.SplitHostPort(b.APIServerEndpoint); err != nil {
			errs = append(errs, field.Invalid(bp.Child("apiServerEndpoint"), b.APIServerEndpoint, err.Error()))
		}
		errs = append(errs, validateToken(tls, p.Child("tlsBootstrapToken"))...)
	}
	if f := d.File; f != nil {
		fp := p.Child("file", "kubeConfigPath")
		kc := f.KubeConfigPath
		if u, err := url.Parse(kc); err == nil && u.Scheme == "file" {
			kc = u.Path // kubeadm's default: file:// becomes a path
		}
		switch u, err := url.Parse(kc); {
		case err != nil:
			errs = append(errs, field.Invalid(fp, kc, "not a valid HTTPS URL or a file on disk"))
		case u.Scheme == "" && kc == "":
			errs = append(errs, field.Invalid(fp, kc, "not a valid HTTPS URL or a file on disk"))
		case u.Scheme == "":
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: kubeadm refuses the file unless %s exists on the node it runs on", fp, kc))
		case u.Scheme != "https":
			errs = append(errs, field.Invalid(fp, kc, "if a URL is used, the scheme must be https"))
		}
		if tls != "" {
			errs = append(errs, validateToken(tls, p.Child("tlsBootstrapToken"))...)
		}
	}
	return errs
}

func validateAbsolutePath(dir string, p *field.Path) field.ErrorList {
	if path.IsAbs(dir) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, dir, "path is not absolute")}
}

var unmountFlags = []string{"MNT_FORCE", "MNT_DETACH", "MNT_EXPIRE", "UMOUNT_NOFOLLOW"}

func (c *resetConfiguration) validate() field.ErrorList {
	errs := validateCRISocket(c.CRISocket, field.NewPath("criSocket"))
	if c.CertificatesDir != "" { // kubeadm's default is /etc/kubernetes/pki
		errs = append(errs, validateAbsolutePath(c.CertificatesDir, field.NewPath("certificatesDir"))...)
	}
	for i, f := range c.UnmountFlags {
		if !slices.Contains(unmountFlags, f) {
			errs = append(errs, field.NotSupported(field.NewPath("unmountFlags").Index(i), f, unmountFlags))
		}
	}
	return errs
}

func (c *upgradeConfiguration) validate() field.ErrorList {
	var errs field.ErrorList
	if c.Apply.Patches != nil {
		errs = append(errs, validateAbsolutePath(c.Apply.Patches.Directory, field.NewPath("apply", "patches", "directory"))...)
	}
	if c.Node.Patches != nil {
		errs = append(errs, validateAbsolutePath(c.Node.Patches.Directory, field.NewPath("node", "patches", "directory"))...)
	}
	errs = append(errs, validatePullPolicy(c.Apply.ImagePullPolicy, field.NewPath("apply", "imagePullPolicy"))...)
	return append(errs, validatePullPolicy(c.Node.ImagePullPolicy, field.NewPath("node", "imagePullPolicy"))...)
}

// initSpec and joinSpec are the per-node kinds of any apiVersion in one shape.
type initSpec struct {
	tokens         []bootstrapToken
	node           nodeReg
	endpoint       apiEndpoint
	certificateKey string
}

func (s *initSpec) validate(mergeMethods bool, r *Report) field.ErrorList {
	errs := s.node.validate(field.NewPath("nodeRegistration"), mergeMethods, r)
	errs = append(errs, validateBootstrapTokens(s.tokens, field.NewPath("bootstrapTokens"))...)
	errs = append(errs, validateAPIEndpoint(s.endpoint, field.NewPath("localAPIEndpoint"))...)
	return append(errs, validateCertificateKey(s.certificateKey, field.NewPath("certificateKey"))...)
}

type joinSpec struct {
	node         nodeReg
	caCertPath   string
	discovery    discovery
	controlPlane *joinControlPlane
}

func (s *joinSpec) validate(mergeMethods bool, r *Report) field.ErrorList {
	errs := s.discovery.validate(field.NewPath("discovery"), r)
	errs = append(errs, s.node.validate(field.NewPath("nodeRegistration"), mergeMethods, r)...)
	if cp := s.controlPlane; cp != nil {
		p := field.NewPath("controlPlane")
		errs = append(errs, validateAPIEndpoint(cp.LocalAPIEndpoint, p.Child("localAPIEndpoint"))...)
		errs = append(errs, validateCertificateKey(cp.CertificateKey, p.Child("certificateKey"))...)
	}
	if c := s.caCertPath; c != "" && (!path.IsAbs(c) || !strings.HasSuffix(c, ".crt")) {
		errs = append(errs, field.Invalid(field.NewPath("caCertPath"), c, "the ca certificate path must be an absolute path ending in .crt"))
	}
	return errs
}
