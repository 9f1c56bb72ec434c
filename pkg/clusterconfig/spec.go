package clusterconfig

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// spec is a ClusterConfiguration of any apiVersion in one shape, for the
// semantic checks.
type spec struct {
	apiVersion           string
	kubernetesVersion    string
	controlPlaneEndpoint string
	certificatesDir      string
	imageRepository      string
	encryptionAlgorithm  string
	networking           networking
	certSANs             []string
	dnsImageRepository   string
	args                 []componentArgs
	etcdLocal            *localEtcd[argV1]
	etcdExternal         *externalEtcd
	featureGates         map[string]bool
	certValidity         *metav1.Duration
	caCertValidity       *metav1.Duration
}

type componentArgs struct {
	path *field.Path
	args []argV1
}

// strictInto decodes js into a T as kubeadm's strict decoder does, adding
// unknown and duplicate fields to r; a type error is returned.
func strictInto[T any](js []byte, r *Report) (*T, error) {
	var v T
	errs, err := kjson.UnmarshalStrict(js, &v)
	if err != nil {
		return nil, err
	}
	for _, e := range errs {
		r.errorf("%v", e)
	}
	return &v, nil
}

// decodeStrict decodes a ClusterConfiguration into the schema of apiVersion.
func decodeStrict(js []byte, apiVersion string, r *Report) (*spec, error) {
	switch apiVersion {
	case V1beta3:
		c, err := strictInto[clusterConfigurationV1beta3](js, r)
		if err != nil {
			return nil, err
		}
		return fromV1beta3(c), nil
	case V1:
		c, err := strictInto[clusterConfiguration[argV1]](js, r)
		if err != nil {
			return nil, err
		}
		return fromNew(c, identityArg), nil
	default:
		c, err := strictInto[clusterConfiguration[argV1beta4]](js, r)
		if err != nil {
			return nil, err
		}
		return fromNew(c, fromArgV1beta4), nil
	}
}

func identityArg(a argV1) argV1 { return a }

func fromArgV1beta4(a argV1beta4) argV1 { return argV1{Name: a.Name, Value: a.Value} }

func fromNew[A any](c *clusterConfiguration[A], conv func(A) argV1) *spec {
	list := func(in []A) []argV1 {
		out := make([]argV1, 0, len(in))
		for _, a := range in {
			out = append(out, conv(a))
		}
		return out
	}
	s := &spec{
		apiVersion:           c.APIVersion,
		kubernetesVersion:    c.KubernetesVersion,
		controlPlaneEndpoint: c.ControlPlaneEndpoint,
		certificatesDir:      c.CertificatesDir,
		imageRepository:      c.ImageRepository,
		encryptionAlgorithm:  c.EncryptionAlgorithm,
		networking:           c.Networking,
		certSANs:             c.APIServer.CertSANs,
		dnsImageRepository:   c.DNS.ImageRepository,
		featureGates:         c.FeatureGates,
		certValidity:         c.CertificateValidityPeriod,
		caCertValidity:       c.CACertificateValidityPeriod,
		etcdExternal:         c.Etcd.External,
	}
	s.setArgs(list(c.APIServer.ExtraArgs), list(c.ControllerManager.ExtraArgs), list(c.Scheduler.ExtraArgs))
	if l := c.Etcd.Local; l != nil {
		s.setLocalEtcd(l.imageMeta, l.DataDir, l.ServerCertSANs, l.PeerCertSANs, list(l.ExtraArgs))
	}
	return s
}

// setArgs records the components' arguments, by field path.
func (s *spec) setArgs(apiServer, controllerManager, scheduler []argV1) {
	s.args = []componentArgs{
		{field.NewPath("apiServer", "extraArgs"), apiServer},
		{field.NewPath("controllerManager", "extraArgs"), controllerManager},
		{field.NewPath("scheduler", "extraArgs"), scheduler},
	}
}

// setLocalEtcd records a local etcd and its arguments.
func (s *spec) setLocalEtcd(image imageMeta, dataDir string, serverSANs, peerSANs []string, args []argV1) {
	s.etcdLocal = &localEtcd[argV1]{imageMeta: image, DataDir: dataDir, ServerCertSANs: serverSANs, PeerCertSANs: peerSANs}
	s.args = append(s.args, componentArgs{field.NewPath("etcd", "local", "extraArgs"), args})
}

func fromV1beta3(c *clusterConfigurationV1beta3) *spec {
	list := func(m map[string]string) []argV1 {
		out := make([]argV1, 0, len(m))
		for k, v := range m {
			out = append(out, argV1{Name: k, Value: v})
		}
		slices.SortFunc(out, func(a, b argV1) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	s := &spec{
		apiVersion:           c.APIVersion,
		kubernetesVersion:    c.KubernetesVersion,
		controlPlaneEndpoint: c.ControlPlaneEndpoint,
		certificatesDir:      c.CertificatesDir,
		imageRepository:      c.ImageRepository,
		encryptionAlgorithm:  "RSA-2048",
		networking:           c.Networking,
		certSANs:             c.APIServer.CertSANs,
		dnsImageRepository:   c.DNS.ImageRepository,
		featureGates:         c.FeatureGates,
	}
	s.setArgs(list(c.APIServer.ExtraArgs), list(c.ControllerManager.ExtraArgs), list(c.Scheduler.ExtraArgs))
	if l := c.Etcd.Local; l != nil {
		s.setLocalEtcd(l.imageMeta, l.DataDir, l.ServerCertSANs, l.PeerCertSANs, list(l.ExtraArgs))
	}
	if e := c.Etcd.External; e != nil {
		s.etcdExternal = &externalEtcd{Endpoints: e.Endpoints, CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile}
	}
	return s
}

// setDefaults applies kubeadm's static defaults, which decide what is
// validated (an empty serviceSubnet is 10.96.0.0/12, and so on).
func (s *spec) setDefaults() {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&s.networking.ServiceSubnet, "10.96.0.0/12")
	def(&s.networking.DNSDomain, "cluster.local")
	def(&s.certificatesDir, "/etc/kubernetes/pki")
	def(&s.imageRepository, "registry.k8s.io")
	def(&s.encryptionAlgorithm, "RSA-2048")
	if s.etcdLocal == nil && s.etcdExternal == nil {
		s.etcdLocal = &localEtcd[argV1]{}
	}
	if s.etcdLocal != nil {
		def(&s.etcdLocal.DataDir, "/var/lib/etcd")
	}
	if e := s.etcdExternal; e != nil && len(e.HTTPEndpoints) == 0 && len(e.Endpoints) > 0 {
		e.HTTPEndpoints = slices.Clone(e.Endpoints)
	}
}
