package clusterconfig

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
)

// FileReport is the outcome of validating a whole kubeadm config file, as
// `kubeadm config validate` reads it: every problem of every document (those
// of the ClusterConfiguration as they are, the others prefixed with their
// document), and what was checked in each document.
type FileReport struct {
	Report
	// KubeadmRelease is the kubeadm release whose rules applied, e.g. "1.37".
	KubeadmRelease string           `json:"kubeadmRelease,omitempty"`
	Documents      []DocumentReport `json:"documents"`
}

// DocumentReport is what was found in one document of a file.
type DocumentReport struct {
	Index      int    `json:"index"`
	Line       int    `json:"line"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Checked says how far the document was checked: "kubeadm" (strict
	// decoding and kubeadm's checks), "decoding" (strict decoding only: a
	// component config), or "no" (refused before it could be read).
	Checked  string   `json:"checked"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
}

// ValidateFile validates every document of a kubeadm config file the way
// `kubeadm config validate` does: the file splits into documents that each
// name a known apiVersion and kind, no kind twice; each kubeadm kind decodes
// strictly against its apiVersion's schema and passes kubeadm's checks;
// component configs decode strictly. The kubeadm release whose rules apply is
// opts.KubeadmVersion, or the newest that reads the file's apiVersions.
func ValidateFile(data []byte, opts ValidateOptions) *FileReport {
	fr := &FileReport{Report: *newReport(), Documents: []DocumentReport{}}
	docs, err := SplitFile(data)
	if err != nil {
		fr.errorf("%v", err)
		return fr
	}
	var apiVersions []string
	initOrCluster := false
	for _, d := range docs {
		if groupOf(d.APIVersion) == Group {
			apiVersions = append(apiVersions, d.APIVersion)
			initOrCluster = initOrCluster || d.Kind == KindInit || d.Kind == Kind
		}
	}
	rel, err := selectRelease(opts.KubeadmVersion, apiVersions)
	if err != nil {
		fr.errorf("%v", err)
		return fr
	}
	fr.KubeadmRelease = rel.String()
	for _, v := range rel.deprecated {
		if slices.Contains(apiVersions, v) {
			fr.Warnings = append(fr.Warnings, fmt.Sprintf("kubeadm %s deprecates %s: 'kubeadm config migrate' writes the newer apiVersion", rel, v))
		}
	}
	if len(docs) == 0 {
		fr.Warnings = append(fr.Warnings, "the file holds no document: kubeadm config validate accepts it, but kubeadm init and join need one")
	}
	for i := range docs {
		d := &docs[i]
		dr := DocumentReport{Index: d.Index, Line: d.Line, APIVersion: d.APIVersion, Kind: d.Kind, Checked: "no"}
		r := newReport()
		if d.Problem != "" {
			r.errorf("%s", d.Problem)
		} else {
			dr.Checked = validateDocument(d, rel, initOrCluster, r)
		}
		dr.Errors, dr.Warnings = r.Errors, r.Warnings
		fr.Documents = append(fr.Documents, dr)
		prefix := ""
		if d.Kind != Kind && d.Problem == "" {
			prefix = fmt.Sprintf("document %d (%s, line %d): ", d.Index, d.Kind, d.Line)
		}
		for _, e := range r.Errors {
			fr.Errors = append(fr.Errors, prefix+e)
		}
		for _, w := range r.Warnings {
			fr.Warnings = append(fr.Warnings, prefix+w)
		}
		if d.Kind == Kind || (fr.APIVersion == "" && groupOf(d.APIVersion) == Group) {
			fr.APIVersion = d.APIVersion
		}
	}
	return fr
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// validateDocument checks one document of a file and says how far.
func validateDocument(d *FileDocument, rel *release, initOrCluster bool, r *Report) string {
	known := func() bool {
		if groupOf(d.APIVersion) != Group {
			return false
		}
		if why := rel.checkAPIVersion(d.APIVersion); why != "" {
			r.errorf("%s", why)
			return true
		}
		if !slices.Contains(kubeadmKinds(d.APIVersion), d.Kind) {
			r.errorf("unknown configuration API %s, kind %s", d.APIVersion, d.Kind)
		}
		return true
	}
	switch {
	case known():
		if !r.Valid() {
			return "no"
		}
		if js, ok := strictJSON(d.Data, r); ok {
			validateKubeadmKind(js, d.APIVersion, d.Kind, rel, r)
		}
		return "kubeadm"
	case d.APIVersion == KubeletAPIVersion && d.Kind == KindKubelet, d.APIVersion == ProxyAPIVersion && d.Kind == KindProxy:
		if initOrCluster {
			if js, ok := strictJSON(d.Data, r); ok {
				validateComponentConfig(js, d.Kind, rel, r)
			}
			return "decoding"
		}
		// kubeadm reads component configs only along with an
		// InitConfiguration or ClusterConfiguration.
		probe := newReport()
		if js, ok := strictJSON(d.Data, probe); ok {
			validateComponentConfig(js, d.Kind, rel, probe)
		}
		for _, e := range probe.Errors {
			r.Warnings = append(r.Warnings, e+" (kubeadm reads this document only with an InitConfiguration or ClusterConfiguration)")
		}
		return "decoding"
	default:
		r.errorf("unknown configuration API %s, kind %s", d.APIVersion, d.Kind)
		return "no"
	}
}

// strictJSON converts YAML to JSON, refusing a key given twice (and what
// package input refuses).
func strictJSON(data []byte, r *Report) ([]byte, bool) {
	js, err := input.YAMLToJSONStrict(data)
	if err == nil {
		return js, true
	}
	if input.Refused(err) {
		r.errorf("%v", err)
	} else if _, lax := input.YAMLToJSON(data); lax != nil {
		r.errorf("not YAML: %v", lax)
	} else { // YAML, but with a key given twice
		r.errorf("%s", strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " "))
	}
	return nil, false
}

// validateKubeadmKind decodes a kubeadm document strictly and checks it.
func validateKubeadmKind(js []byte, apiVersion, kind string, rel *release, r *Report) {
	var errs field.ErrorList
	var err error
	v1 := apiVersion == V1
	switch kind {
	case Kind:
		validateCluster(js, apiVersion, rel, r)
		return
	case KindInit:
		var s *initSpec
		if s, err = decodeInit(js, apiVersion, r); err == nil && r.Valid() {
			errs = s.validate(v1, r)
		}
	case KindJoin:
		var s *joinSpec
		if s, err = decodeJoin(js, apiVersion, r); err == nil && r.Valid() {
			errs = s.validate(v1, r)
		}
	case KindReset:
		var c *resetConfiguration
		if c, err = strictInto[resetConfiguration](js, r); err == nil && r.Valid() {
			errs = c.validate()
		}
	case KindUpgrade:
		var c *upgradeConfiguration
		if c, err = strictInto[upgradeConfiguration](js, r); err == nil && r.Valid() {
			errs = c.validate()
		}
	}
	if err != nil {
		r.errorf("%s", decodeError(err))
	}
	r.addFieldErrors(errs)
}
