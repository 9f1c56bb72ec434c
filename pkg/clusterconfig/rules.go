package clusterconfig

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	netutils "k8s.io/utils/net"
)

// kubeadm's semantic checks, applied to a decoded and defaulted spec.

func (s *spec) validate(r *Report, rel *release) {
	s.validateVersion(r, rel)
	s.validateEndpoint(r)

	var errs field.ErrorList
	if s.dnsImageRepository != "" {
		errs = append(errs, validateImageRepository(s.dnsImageRepository, field.NewPath("dns", "imageRepository"))...)
	}
	errs = append(errs, s.validateNetworking(r)...)
	sans := make([]string, len(s.certSANs))
	for i, san := range s.certSANs {
		sans[i] = strings.ToLower(san) // kubeadm lowercases the API server's SANs before checking
	}
	errs = append(errs, validateCertSANs(sans, field.NewPath("apiServer", "certSANs"))...)
	for _, c := range s.args {
		errs = append(errs, validateArgs(c.args, c.path, s.apiVersion == V1)...)
	}
	if !path.IsAbs(s.certificatesDir) {
		errs = append(errs, field.Invalid(field.NewPath("certificatesDir"), s.certificatesDir, "path is not absolute"))
	}
	errs = append(errs, s.validateFeatureGates(rel, r)...)
	errs = append(errs, validateImageRepository(s.imageRepository, field.NewPath("imageRepository"))...)
	errs = append(errs, s.validateEtcd()...)
	if !slices.Contains(encryptionAlgorithms, s.encryptionAlgorithm) {
		errs = append(errs, field.NotSupported(field.NewPath("encryptionAlgorithm"), s.encryptionAlgorithm, encryptionAlgorithms))
	}
	r.addFieldErrors(errs)
	s.warnValidity(r)
}

var encryptionAlgorithms = []string{"ECDSA-P256", "ECDSA-P384", "RSA-2048", "RSA-3072", "RSA-4096"}

// The patterns kubeadm matches kubernetesVersion with. They are compiled on
// first use: a command that never validates should not pay for them.
var (
	semverPattern  = lazyregexp.New(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-\w.+]*)?$`)
	prefixPattern  = lazyregexp.New(`^((release|ci)/)?([-\w.+]+)$`)
	versionLabel   = lazyregexp.New(`^((latest|stable)+(-[1-9](\.[1-9](\d)?)?)?)\z`)
	kubernetesPath = field.NewPath("kubernetesVersion")
)

// validateVersion checks kubernetesVersion as kubeadm normalises it. A label
// such as stable-1 would make kubeadm ask the network; the plugin never does,
// and warns instead, as kubeadm does when it is offline.
func (s *spec) validateVersion(r *Report, rel *release) {
	v := s.kubernetesVersion
	if v == "" {
		r.Warnings = append(r.Warnings, "kubernetesVersion is empty: kubeadm would resolve \"stable-1\" on the network; set it explicitly")
		return
	}
	if !semverPattern().MatchString(v) {
		m := prefixPattern().FindStringSubmatch(v)
		if m == nil {
			r.addFieldErrors(field.ErrorList{field.Invalid(kubernetesPath, v, "invalid version")})
			return
		}
		switch {
		case semverPattern().MatchString(m[3]):
			v = m[3]
		case versionLabel().MatchString(m[3]):
			r.Warnings = append(r.Warnings, fmt.Sprintf("kubernetesVersion %q is a label kubeadm resolves on the network; set an explicit version", v))
			return
		default:
			r.addFieldErrors(field.ErrorList{field.Invalid(kubernetesPath, s.kubernetesVersion,
				"doesn't match patterns for neither semantic version nor labels (stable, latest, ...)")})
			return
		}
	}
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		r.addFieldErrors(field.ErrorList{field.Invalid(kubernetesPath, s.kubernetesVersion, "couldn't parse Kubernetes version: "+err.Error())})
		return
	}
	if minimum := rel.minimumControlPlane(); parsed.LessThan(minimum) {
		r.addFieldErrors(field.ErrorList{field.Invalid(kubernetesPath, s.kubernetesVersion, fmt.Sprintf(
			"kubeadm %s only supports deploying clusters with the control plane version >= %s", rel, minimum))})
	}
}

const (
	minServiceSubnetSize  = 10
	minPodSubnetSize      = 14
	maxServiceSubnetBits  = 20
	podSubnetNodeMaskDiff = 16
)

func (s *spec) validateNetworking(r *Report) field.ErrorList {
	var errs field.ErrorList
	n := s.networking
	for _, msg := range validation.IsDNS1123Subdomain(n.DNSDomain) {
		errs = append(errs, field.Invalid(field.NewPath("networking", "dnsDomain"), n.DNSDomain, msg))
	}
	svcPath := field.NewPath("networking", "serviceSubnet")
	if cidrs, cidrErrs := parseSubnets(n.ServiceSubnet, minServiceSubnetSize, svcPath, r); cidrErrs != nil || cidrs != nil {
		errs = append(errs, cidrErrs...)
		for _, c := range cidrs {
			ones, bits := c.Mask.Size()
			if bits-ones > maxServiceSubnetBits {
				errs = append(errs, field.Invalid(svcPath, c.String(), fmt.Sprintf(
					"specified service subnet is too large; for %d-bit addresses, the mask must be >= %d", bits, bits-maxServiceSubnetBits)))
			}
		}
	}
	if n.PodSubnet == "" {
		return errs
	}
	podPath := field.NewPath("networking", "podSubnet")
	cidrs, cidrErrs := parseSubnets(n.PodSubnet, minPodSubnetSize, podPath, r)
	errs = append(errs, cidrErrs...)
	if s.lastArg("controllerManager", "allocate-node-cidrs") == "false" {
		return errs
	}
	for _, c := range cidrs {
		flag, nodeMask := "node-cidr-mask-size-ipv4", 24
		if netutils.IsIPv6CIDR(c) {
			flag, nodeMask = "node-cidr-mask-size-ipv6", 64
		}
		if v := s.lastArg("controllerManager", flag); v != "" {
			m, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, field.Invalid(podPath, c.String(), fmt.Sprintf(
					"could not parse the value of the kube-controller-manager flag %s as an integer: %v", flag, err)))
				continue
			}
			nodeMask = m
		}
		ones, _ := c.Mask.Size()
		switch {
		case ones > nodeMask:
			errs = append(errs, field.Invalid(podPath, c.String(), fmt.Sprintf(
				"the size of pod subnet with mask %d is smaller than the size of node subnet with mask %d", ones, nodeMask)))
		case nodeMask-ones > podSubnetNodeMaskDiff:
			errs = append(errs, field.Invalid(podPath, c.String(), fmt.Sprintf(
				"pod subnet mask (%d) and node-mask (%d) difference is greater than %d", ones, nodeMask, podSubnetNodeMaskDiff)))
		}
	}
	return errs
}

// parseSubnets parses a comma-separated CIDR list: one CIDR, or two of
// different families (dual-stack), each with at least minSize addresses.
func parseSubnets(v string, minSize int64, p *field.Path, r *Report) ([]*net.IPNet, field.ErrorList) {
	cidrs, err := netutils.ParseCIDRs(strings.Split(v, ","))
	if err != nil {
		return nil, field.ErrorList{field.Invalid(p, v, "couldn't parse subnet")}
	}
	var errs field.ErrorList
	switch len(cidrs) {
	case 1:
	case 2:
		if dual, _ := netutils.IsDualStackCIDRs(cidrs); !dual {
			errs = append(errs, field.Invalid(p, v, "expected one (IPv4 or IPv6) CIDR or two CIDRs from each family for dual-stack networking"))
		}
	default:
		errs = append(errs, field.Invalid(p, v, "expected one (IPv4 or IPv6) CIDR or two CIDRs from each family for dual-stack networking"))
	}
	_, siteLocal, _ := netutils.ParseCIDRSloppy("fec0::/10")
	for _, c := range cidrs {
		if size := netutils.RangeSize(c); size < minSize {
			errs = append(errs, field.Invalid(p, c.String(), fmt.Sprintf("subnet with %d address(es) is too small, the minimum is %d", size, minSize)))
		}
		if siteLocal.Contains(c.IP) || c.Contains(siteLocal.IP) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: the subnet %v contains IPv6 site-local addresses that belong to fec0::/10 which has been deprecated by rfc3879", p, c))
		}
	}
	return cidrs, errs
}

// lastArg returns the value of the last argument named name of a component,
// which is the one that takes effect.
func (s *spec) lastArg(component, name string) string {
	for _, c := range s.args {
		if c.path.Root().String() != component {
			continue
		}
		for i := len(c.args) - 1; i >= 0; i-- {
			if c.args[i].Name == name {
				return c.args[i].Value
			}
		}
	}
	return ""
}

func validateArgs(args []argV1, p *field.Path, mergeMethods bool) field.ErrorList {
	var errs field.ErrorList
	for i, a := range args {
		if a.Name == "" {
			errs = append(errs, field.Invalid(p, fmt.Sprintf("index %d", i), "argument has no name"))
		}
		if mergeMethods && a.MergeMethod != "" && a.MergeMethod != "append" && a.MergeMethod != "prepend" {
			errs = append(errs, field.Invalid(p, fmt.Sprintf("index %d", i), "argument has an invalid merge method (want append, prepend or none)"))
		}
	}
	return errs
}

func validateCertSANs(sans []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, san := range sans {
		if netutils.ParseIPSloppy(san) != nil {
			continue
		}
		dnsErrs := validation.IsDNS1123Subdomain(san)
		wildErrs := validation.IsWildcardDNS1123Subdomain(san)
		if len(dnsErrs) != 0 && len(wildErrs) != 0 {
			errs = append(errs, field.Invalid(p, san, "altname is not a valid IP address, DNS label or a DNS label with subdomain wildcards"))
		}
	}
	return errs
}

// validateFeatureGates checks the gates' names against the release's, and
// repeats kubeadm's warning on a deprecated one.
func (s *spec) validateFeatureGates(rel *release, r *Report) field.ErrorList {
	var errs field.ErrorList
	names := make([]string, 0, len(s.featureGates))
	for name := range s.featureGates {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := field.NewPath("featureGates").Key(name)
		g, ok := rel.gate(name)
		if ok {
			if g.deprecated != "" {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %s", p, g.deprecated))
			}
			continue
		}
		why := fmt.Sprintf("%s is not a valid feature name in kubeadm %s (it knows: %s)", name, rel, strings.Join(rel.gateNames(), ", "))
		if removed, ok := rel.removedIn(name); ok {
			why = fmt.Sprintf("%s is not a valid feature name: kubeadm %s removed it", name, removed)
		}
		errs = append(errs, field.Invalid(p, s.featureGates[name], why))
	}
	return errs
}

// imageReference is distribution/reference's grammar for a repository name,
// which kubeadm applies to "<imageRepository>/name:tag".
var imageReference = lazyregexp.New(func() string {
	alnum := `[a-z0-9]+`
	sep := `(?:[._]|__|[-]+)`
	component := alnum + `(?:` + sep + alnum + `)*`
	domainComponent := `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domain := `(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
	name := `(?:` + domain + `/)?` + component + `(?:/` + component + `)*`
	return `^` + name + `:[\w][\w.-]{0,127}$`
}())

func validateImageRepository(repo string, p *field.Path) field.ErrorList {
	if imageReference().MatchString(repo + "/name:tag") {
		return nil
	}
	return field.ErrorList{field.Invalid(p, repo, "invalid image repository format")}
}

func (s *spec) validateEtcd() field.ErrorList {
	p := field.NewPath("etcd")
	if s.etcdLocal != nil && s.etcdExternal != nil {
		return field.ErrorList{field.Invalid(p, "", "local and external are mutually exclusive")}
	}
	var errs field.ErrorList
	if l := s.etcdLocal; l != nil {
		lp := p.Child("local")
		if !path.IsAbs(l.DataDir) {
			errs = append(errs, field.Invalid(lp.Child("dataDir"), l.DataDir, "path is not absolute"))
		}
		errs = append(errs, validateCertSANs(l.ServerCertSANs, lp.Child("serverCertSANs"))...)
		errs = append(errs, validateCertSANs(l.PeerCertSANs, lp.Child("peerCertSANs"))...)
		if l.ImageRepository != "" {
			errs = append(errs, validateImageRepository(l.ImageRepository, lp.Child("imageRepository"))...)
		}
	}
	if e := s.etcdExternal; e != nil {
		ep := p.Child("external")
		requireHTTPS := e.CAFile != "" || e.CertFile != "" || e.KeyFile != ""
		switch {
		case (e.CertFile == "") != (e.KeyFile == ""):
			errs = append(errs, field.Invalid(ep, "", "either both or none of certFile and keyFile must be set"))
		case e.CertFile != "" && e.CAFile == "":
			errs = append(errs, field.Invalid(ep, "", "setting certFile and keyFile requires caFile"))
		}
		if len(e.Endpoints) == 0 {
			errs = append(errs, field.Invalid(ep.Child("endpoints"), "", "at least one endpoint must be specified"))
		}
		errs = append(errs, validateURLs(e.Endpoints, requireHTTPS, ep.Child("endpoints"))...)
		errs = append(errs, validateURLs(e.HTTPEndpoints, false, ep.Child("httpEndpoints"))...)
		for name, f := range map[string]string{"caFile": e.CAFile, "certFile": e.CertFile, "keyFile": e.KeyFile} {
			if f != "" && !path.IsAbs(f) {
				errs = append(errs, field.Invalid(ep.Child(name), f, "path is not absolute"))
			}
		}
		slices.SortStableFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	}
	return errs
}

func validateURLs(urls []string, requireHTTPS bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, u := range urls {
		parsed, err := url.Parse(u)
		if err != nil {
			errs = append(errs, field.Invalid(p, u, "URL parse error: "+err.Error()))
			continue
		}
		if requireHTTPS && parsed.Scheme != "https" {
			errs = append(errs, field.Invalid(p, u, "the URL must be using the HTTPS scheme"))
		}
		if parsed.Scheme == "" {
			errs = append(errs, field.Invalid(p, u, "the URL without scheme is not allowed"))
		}
	}
	return errs
}

const (
	certValidity   = 365 * 24 * time.Hour
	caCertValidity = 10 * 365 * 24 * time.Hour
)

// warnValidity repeats kubeadm's warnings on certificate lifetimes; they
// never make a document invalid.
func (s *spec) warnValidity(r *Report) {
	if c := s.certValidity; c != nil && c.Duration > certValidity {
		r.Warnings = append(r.Warnings, fmt.Sprintf("certificateValidityPeriod: the value %v is more than the recommended default for certificate expiration: %v", c.Duration, certValidity))
	}
	if ca := s.caCertValidity; ca != nil && ca.Duration > caCertValidity {
		r.Warnings = append(r.Warnings, fmt.Sprintf("caCertificateValidityPeriod: the value %v is more than the recommended default for CA certificate expiration: %v", ca.Duration, caCertValidity))
	}
	if c, ca := s.certValidity, s.caCertValidity; c != nil && ca != nil && c.Duration > ca.Duration {
		r.Warnings = append(r.Warnings, fmt.Sprintf("certificateValidityPeriod: the value %v is more than the caCertificateValidityPeriod: %v", c.Duration, ca.Duration))
	}
}
