package clusterconfig

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The ClusterConfiguration schemas the plugin decodes strictly, one per
// apiVersion, mirroring kubeadm's field names and types. They exist to reject
// unknown fields, duplicate keys and wrong types exactly as kubeadm's strict
// decoder does, and to tell the editor which fields hold strings; edits
// themselves work on the generic document so no field is ever dropped.

// argV1beta4 is a v1beta4 extraArgs entry.
type argV1beta4 struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// argV1 is a v1 extraArgs entry, which adds a merge method.
type argV1 struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	MergeMethod string `json:"mergeMethod,omitempty"`
}

type hostPathMount struct {
	Name      string              `json:"name"`
	HostPath  string              `json:"hostPath"`
	MountPath string              `json:"mountPath"`
	ReadOnly  bool                `json:"readOnly,omitempty"`
	PathType  corev1.HostPathType `json:"pathType,omitempty"`
}

type networking struct {
	ServiceSubnet string `json:"serviceSubnet,omitempty"`
	PodSubnet     string `json:"podSubnet,omitempty"`
	DNSDomain     string `json:"dnsDomain,omitempty"`
}

type imageMeta struct {
	ImageRepository string `json:"imageRepository,omitempty"`
	ImageTag        string `json:"imageTag,omitempty"`
}

// component is a v1beta4/v1 control-plane component; A is the argument type.
type component[A any] struct {
	ExtraArgs    []A             `json:"extraArgs,omitempty"`
	ExtraVolumes []hostPathMount `json:"extraVolumes,omitempty"`
	ExtraEnvs    []corev1.EnvVar `json:"extraEnvs,omitempty"`
}

type apiServer[A any] struct {
	component[A] `json:""`
	CertSANs     []string `json:"certSANs,omitempty"`
}

type localEtcd[A any] struct {
	imageMeta      `json:""`
	DataDir        string          `json:"dataDir"`
	ExtraArgs      []A             `json:"extraArgs,omitempty"`
	ExtraEnvs      []corev1.EnvVar `json:"extraEnvs,omitempty"`
	ServerCertSANs []string        `json:"serverCertSANs,omitempty"`
	PeerCertSANs   []string        `json:"peerCertSANs,omitempty"`
}

type externalEtcd struct {
	Endpoints     []string `json:"endpoints"`
	HTTPEndpoints []string `json:"httpEndpoints,omitempty"`
	CAFile        string   `json:"caFile"`
	CertFile      string   `json:"certFile"`
	KeyFile       string   `json:"keyFile"`
}

type etcd[A any] struct {
	Local    *localEtcd[A] `json:"local,omitempty"`
	External *externalEtcd `json:"external,omitempty"`
}

type dns struct {
	imageMeta `json:""`
	Disabled  bool `json:"disabled,omitempty"`
}

type proxy struct {
	Disabled bool `json:"disabled,omitempty"`
}

// clusterConfiguration is the v1beta4 and v1 schema, which differ only in
// the argument type.
type clusterConfiguration[A any] struct {
	metav1.TypeMeta             `json:",inline"`
	Etcd                        etcd[A]          `json:"etcd,omitempty"`
	Networking                  networking       `json:"networking,omitempty"`
	KubernetesVersion           string           `json:"kubernetesVersion,omitempty"`
	ControlPlaneEndpoint        string           `json:"controlPlaneEndpoint,omitempty"`
	APIServer                   apiServer[A]     `json:"apiServer,omitempty"`
	ControllerManager           component[A]     `json:"controllerManager,omitempty"`
	Scheduler                   component[A]     `json:"scheduler,omitempty"`
	DNS                         dns              `json:"dns,omitempty"`
	Proxy                       proxy            `json:"proxy,omitempty"`
	CertificatesDir             string           `json:"certificatesDir,omitempty"`
	ImageRepository             string           `json:"imageRepository,omitempty"`
	FeatureGates                map[string]bool  `json:"featureGates,omitempty"`
	ClusterName                 string           `json:"clusterName,omitempty"`
	EncryptionAlgorithm         string           `json:"encryptionAlgorithm,omitempty"`
	CertificateValidityPeriod   *metav1.Duration `json:"certificateValidityPeriod,omitempty"`
	CACertificateValidityPeriod *metav1.Duration `json:"caCertificateValidityPeriod,omitempty"`
}

// The v1beta3 schema: extraArgs are maps, and there are no extraEnvs.

type componentV1beta3 struct {
	ExtraArgs    map[string]string `json:"extraArgs,omitempty"`
	ExtraVolumes []hostPathMount   `json:"extraVolumes,omitempty"`
}

type apiServerV1beta3 struct {
	componentV1beta3       `json:",inline"`
	CertSANs               []string         `json:"certSANs,omitempty"`
	TimeoutForControlPlane *metav1.Duration `json:"timeoutForControlPlane,omitempty"`
}

type localEtcdV1beta3 struct {
	imageMeta      `json:",inline"`
	DataDir        string            `json:"dataDir"`
	ExtraArgs      map[string]string `json:"extraArgs,omitempty"`
	ServerCertSANs []string          `json:"serverCertSANs,omitempty"`
	PeerCertSANs   []string          `json:"peerCertSANs,omitempty"`
}

type externalEtcdV1beta3 struct {
	Endpoints []string `json:"endpoints"`
	CAFile    string   `json:"caFile"`
	CertFile  string   `json:"certFile"`
	KeyFile   string   `json:"keyFile"`
}

type etcdV1beta3 struct {
	Local    *localEtcdV1beta3    `json:"local,omitempty"`
	External *externalEtcdV1beta3 `json:"external,omitempty"`
}

type clusterConfigurationV1beta3 struct {
	metav1.TypeMeta      `json:",inline"`
	Etcd                 etcdV1beta3      `json:"etcd,omitempty"`
	Networking           networking       `json:"networking,omitempty"`
	KubernetesVersion    string           `json:"kubernetesVersion,omitempty"`
	ControlPlaneEndpoint string           `json:"controlPlaneEndpoint,omitempty"`
	APIServer            apiServerV1beta3 `json:"apiServer,omitempty"`
	ControllerManager    componentV1beta3 `json:"controllerManager,omitempty"`
	Scheduler            componentV1beta3 `json:"scheduler,omitempty"`
	DNS                  imageMeta        `json:"dns,omitempty"`
	CertificatesDir      string           `json:"certificatesDir,omitempty"`
	ImageRepository      string           `json:"imageRepository,omitempty"`
	FeatureGates         map[string]bool  `json:"featureGates,omitempty"`
	ClusterName          string           `json:"clusterName,omitempty"`
}
