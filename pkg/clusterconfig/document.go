// Package clusterconfig parses, edits, validates and marshals kubeadm
// ClusterConfiguration documents of apiVersion kubeadm.k8s.io/v1beta3,
// v1beta4 and v1, and validates whole kubeadm config files (every kubeadm
// kind, component configs) with the rules of one kubeadm release. It works on
// bytes alone (no API client, no network, no look at the host), so every rule
// can be tested with nothing but testdata.
//
// A Document keeps the generic JSON tree of the YAML it was parsed from, so an
// edit never drops or reorders a field the plugin does not know; marshalling
// gives kubeadm's own layout (keys sorted, two-space indent). The apiVersion is
// never converted.
package clusterconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Group is kubeadm's API group.
const Group = "kubeadm.k8s.io"

// The apiVersions of ClusterConfiguration the plugin understands.
const (
	V1beta3 = Group + "/v1beta3"
	V1beta4 = Group + "/v1beta4"
	V1      = Group + "/v1"
)

// Kind is the only kind a Document holds.
const Kind = "ClusterConfiguration"

// Document is one ClusterConfiguration as a generic JSON tree.
type Document struct {
	tree map[string]any
}

// Parse reads a ClusterConfiguration from YAML or JSON. It checks only that
// the text is a mapping with a known apiVersion and kind; Validate checks the
// rest. A key given twice keeps its last value, as kubeadm reads a stored
// document. YAML anchors and aliases are read as kubeadm reads them, each
// alias a copy of its anchor's value and "<<" a merge, so the tree holds
// no alias and Marshal writes every value out in full, as kubeadm's own
// upload of the configuration would. A document that is not YAML, or of
// another kind, or larger than 2 MiB, or whose aliases expand it to more
// than 4 times what its text holds (see internal/input), is an invalid
// configuration (exit 3).
func Parse(data []byte) (*Document, error) {
	return parse(data, false)
}

// ParseStrict is Parse for text a person has just written, such as the
// file edit opened: a key given twice is an error (exit 3), as it is for
// `kubeadm config validate`, instead of its last value silently replacing
// the first, and every field that only the first held being dropped.
func ParseStrict(data []byte) (*Document, error) {
	return parse(data, true)
}

func parse(data []byte, strict bool) (*Document, error) {
	tree, err := decodeTree(data, strict)
	if err != nil {
		return nil, err
	}
	d := &Document{tree: tree}
	if err := checkTypeMeta(d.APIVersion(), d.Kind()); err != nil {
		return nil, err
	}
	return d, nil
}

func checkTypeMeta(apiVersion, kind string) error {
	switch apiVersion {
	case V1beta3, V1beta4, V1:
	case "":
		return exitcode.Invalidf("the document has no apiVersion (want %s, %s or %s)", V1beta4, V1, V1beta3)
	default:
		return exitcode.Invalidf("unsupported apiVersion %q (want %s, %s or %s)", apiVersion, V1beta4, V1, V1beta3)
	}
	if kind != Kind {
		return exitcode.Invalidf("the document is of kind %q, not %s", kind, Kind)
	}
	return nil
}

// decodeTree converts YAML (or JSON) to a JSON tree, keeping numbers exact.
// strict refuses a key given twice.
func decodeTree(data []byte, strict bool) (map[string]any, error) {
	convert := input.YAMLToJSON
	if strict {
		convert = input.YAMLToJSONStrict
	}
	js, err := convert(data)
	switch {
	case input.Refused(err):
		return nil, exitcode.Invalidf("the ClusterConfiguration cannot be used: %w", err)
	case err != nil && strict:
		if _, lax := input.YAMLToJSON(data); lax == nil { // YAML, but with a key given twice
			return nil, exitcode.Invalidf("the ClusterConfiguration gives a key twice, which kubeadm refuses (%s); keep one", duplicateKeys(err))
		}
	}
	if err != nil {
		return nil, exitcode.Invalidf("the ClusterConfiguration is not a YAML mapping: %w", err)
	}
	var tree map[string]any
	if err := unmarshalJSON(js, &tree); err != nil {
		return nil, exitcode.Invalidf("the ClusterConfiguration is not a YAML mapping: %w", err)
	}
	if tree == nil {
		return nil, exitcode.Invalidf("the ClusterConfiguration is not a YAML mapping: the document is empty")
	}
	return tree, nil
}

// duplicateKeys is yaml.v2's strict error as one line without its prefix:
// `line 11: key "apiServer" already set in map`.
func duplicateKeys(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:")
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ")), " ")
}

func unmarshalJSON(js []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("expected a mapping: %w", err)
	}
	return nil
}

// APIVersion returns the document's apiVersion.
func (d *Document) APIVersion() string { s, _ := d.tree["apiVersion"].(string); return s }

// Kind returns the document's kind.
func (d *Document) Kind() string { s, _ := d.tree["kind"].(string); return s }

// KubernetesVersion returns the kubernetesVersion field, or "".
func (d *Document) KubernetesVersion() string {
	s, _ := d.tree["kubernetesVersion"].(string)
	return s
}

// ExternalEtcd reports whether the document sets etcd.external: the
// cluster's etcd is not a static Pod of its control-plane nodes, and kubeadm
// renders no etcd manifest for it.
func (d *Document) ExternalEtcd() bool {
	etcd, _ := d.tree["etcd"].(map[string]any)
	return etcd["external"] != nil
}

// CertificatesDir returns the certificatesDir field, where kubeadm keeps
// the cluster's certificates on each control-plane node (the etcd client
// certificates among them), or "" when unset: kubeadm's default is
// /etc/kubernetes/pki.
func (d *Document) CertificatesDir() string {
	s, _ := d.tree["certificatesDir"].(string)
	return s
}

// Clone returns a deep copy.
func (d *Document) Clone() *Document {
	return &Document{tree: cloneValue(d.tree).(map[string]any)}
}

// Equal reports whether two documents hold the same data, whatever their
// layout in YAML.
func (d *Document) Equal(other *Document) bool {
	a, _ := json.Marshal(d.tree)
	b, _ := json.Marshal(other.tree)
	return bytes.Equal(a, b)
}

// JSON returns the document as JSON.
func (d *Document) JSON() []byte {
	js, _ := json.Marshal(d.tree)
	return js
}

// Marshal returns the document in kubeadm's YAML layout. It fails only on
// text YAML cannot hold (control characters), which an edit can put there.
func (d *Document) Marshal() ([]byte, error) {
	out, err := yaml.JSONToYAML(d.JSON())
	if err != nil {
		return nil, fmt.Errorf("the document cannot be written as YAML: %w", err)
	}
	return out, nil
}

// MustMarshal is Marshal for documents known to marshal (tests, tools).
func (d *Document) MustMarshal() []byte {
	out, err := d.Marshal()
	if err != nil {
		panic(err)
	}
	return out
}

// replaceTree installs a tree produced by a patch, refusing to change the
// apiVersion or kind.
func (d *Document) replaceTree(js []byte) error {
	var tree map[string]any
	if err := unmarshalJSON(js, &tree); err != nil || tree == nil {
		return exitcode.Usagef("the patch does not leave a mapping")
	}
	for _, key := range []string{"apiVersion", "kind"} {
		if !reflect.DeepEqual(tree[key], d.tree[key]) {
			return d.refuseTypeChange(key)
		}
	}
	d.tree = tree
	return nil
}
