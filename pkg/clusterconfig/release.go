package clusterconfig

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// What differs between the kubeadm releases the plugin knows: the apiVersions
// each reads, its feature gates, and the oldest control plane it deploys.
// Everything else kubeadm checks is the same in all of them.

// release is one kubeadm minor release.
type release struct {
	minor int
	// apiVersions are the kubeadm apiVersions it reads; experimental ones
	// need --allow-experimental-api, deprecated ones draw a warning.
	apiVersions  []string
	experimental []string
	deprecated   []string
	gates        []gate
}

// gate is a kubeadm feature gate; deprecated is kubeadm's own message for a
// gate it still accepts but will remove.
type gate struct {
	name       string
	deprecated string
}

const ecdsaDeprecation = "deprecated: it goes with v1beta3; v1beta4 has ClusterConfiguration.encryptionAlgorithm"

// releases are the kubeadm releases whose rules the plugin applies, oldest
// first. Source: cmd/kubeadm/app/features and util/config of each release.
var releases = []release{
	{minor: 35, apiVersions: []string{V1beta3, V1beta4}, deprecated: []string{V1beta3}, gates: []gate{
		{name: "ControlPlaneKubeletLocalMode"}, {name: "NodeLocalCRISocket"},
		{name: "PublicKeysECDSA", deprecated: ecdsaDeprecation}, {name: "RootlessControlPlane"},
	}},
	{minor: 36, apiVersions: []string{V1beta3, V1beta4}, deprecated: []string{V1beta3}, gates: []gate{
		{name: "NodeLocalCRISocket"}, {name: "PublicKeysECDSA", deprecated: ecdsaDeprecation}, {name: "RootlessControlPlane"},
	}},
	{minor: 37, apiVersions: []string{V1beta4, V1}, experimental: []string{V1}, gates: []gate{
		{name: "RootlessControlPlane"},
	}},
}

// DefaultKubeadmVersion is the newest kubeadm release the plugin knows the
// rules of; documents of apiVersion v1beta3, which it no longer reads, get
// the rules of the newest release that does.
const DefaultKubeadmVersion = "v1.37.2"

// KubeadmReleases lists the kubeadm minor releases the plugin knows, such as
// "1.37", oldest first.
func KubeadmReleases() []string {
	out := make([]string, 0, len(releases))
	for _, r := range releases {
		out = append(out, r.String())
	}
	return out
}

func (r *release) String() string { return fmt.Sprintf("1.%d", r.minor) }

// minimumControlPlane is the oldest kubernetesVersion the release deploys:
// one minor below itself.
func (r *release) minimumControlPlane() *version.Version {
	return version.MustParseSemantic(fmt.Sprintf("v1.%d.0", r.minor-1))
}

// reads reports whether the release reads apiVersion.
func (r *release) reads(apiVersion string) bool { return slices.Contains(r.apiVersions, apiVersion) }

// gate returns the release's gate of that name.
func (r *release) gate(name string) (gate, bool) {
	i := slices.IndexFunc(r.gates, func(g gate) bool { return g.name == name })
	if i < 0 {
		return gate{}, false
	}
	return r.gates[i], true
}

func (r *release) gateNames() []string {
	names := make([]string, 0, len(r.gates))
	for _, g := range r.gates {
		names = append(names, g.name)
	}
	return names
}

// removedIn names the release that dropped a gate an older release knew.
func (r *release) removedIn(name string) (*release, bool) {
	var last *release
	for i := range releases {
		if releases[i].minor > r.minor {
			break
		}
		if _, ok := releases[i].gate(name); ok {
			last = &releases[i]
		}
	}
	if last == nil || last.minor >= r.minor {
		return nil, false
	}
	return &releases[slices.IndexFunc(releases, func(x release) bool { return x.minor == last.minor+1 })], true
}

// newestReading is the newest release that reads apiVersion, if any.
func newestReading(apiVersion string) *release {
	for i := len(releases) - 1; i >= 0; i-- {
		if releases[i].reads(apiVersion) {
			return &releases[i]
		}
	}
	return nil
}

// CheckKubeadmVersion reports whether v names a kubeadm release whose rules
// Validate applies. "" is fine: the document's apiVersion chooses.
func CheckKubeadmVersion(v string) error {
	if v == "" {
		return nil
	}
	_, err := releaseOf(v)
	return err
}

func releaseOf(v string) (*release, error) {
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		return nil, fmt.Errorf("want a version such as %s, not %q", DefaultKubeadmVersion, v)
	}
	if parsed.Major() != 1 {
		return nil, fmt.Errorf("want a kubeadm 1.x release, not %q", v)
	}
	for i := range releases {
		if uint(releases[i].minor) == parsed.Minor() {
			return &releases[i], nil
		}
	}
	return nil, fmt.Errorf("the plugin knows the rules of kubeadm %s, not of %s", strings.Join(KubeadmReleases(), ", "), v)
}

// selectRelease picks the release whose rules apply to documents of the
// given kubeadm apiVersions: the one asked for, or else the newest release
// that reads them all (1.36 when there is a v1beta3 document).
func selectRelease(kubeadmVersion string, apiVersions []string) (*release, error) {
	if kubeadmVersion != "" {
		return releaseOf(kubeadmVersion)
	}
	newest := &releases[len(releases)-1]
	for _, v := range apiVersions {
		if r := newestReading(v); r != nil && r.minor < newest.minor {
			newest = r
		}
	}
	return newest, nil
}

// checkAPIVersion words why the release does not read a kubeadm apiVersion,
// as kubeadm does, or returns "" when it reads it.
func (r *release) checkAPIVersion(apiVersion string) string {
	if r.reads(apiVersion) {
		return ""
	}
	if old, ok := oldAPIVersions[apiVersion]; ok {
		return fmt.Sprintf("kubeadm %s no longer reads %s: use kubeadm %s and 'kubeadm config migrate'", r, apiVersion, old)
	}
	if newer := newestReading(apiVersion); newer != nil && newer.minor < r.minor {
		return fmt.Sprintf("kubeadm %s no longer reads %s: use kubeadm v%s and 'kubeadm config migrate'", r, apiVersion, newer)
	}
	if newestReading(apiVersion) != nil {
		return fmt.Sprintf("kubeadm %s does not read %s yet (newer releases do)", r, apiVersion)
	}
	return fmt.Sprintf("unknown configuration API %s", apiVersion)
}

// oldAPIVersions are the kubeadm apiVersions of releases before the table,
// with the last kubeadm that read each.
var oldAPIVersions = map[string]string{
	Group + "/v1alpha1": "v1.11",
	Group + "/v1alpha2": "v1.12",
	Group + "/v1alpha3": "v1.14",
	Group + "/v1beta1":  "v1.15",
	Group + "/v1beta2":  "v1.22",
}
