package clusterconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateOptions tune validation.
type ValidateOptions struct {
	// KubeadmVersion is the kubeadm release the cluster is managed with, one
	// of KubeadmReleases. Empty means the newest release that reads the
	// document's apiVersion: 1.37, or 1.36 for v1beta3.
	KubeadmVersion string
}

// Report is the outcome of validating one document: every problem found,
// each naming its field path, and warnings that do not make it invalid.
type Report struct {
	APIVersion string   `json:"apiVersion,omitempty"`
	Errors     []string `json:"errors"`
	Warnings   []string `json:"warnings"`
}

// Valid reports whether the document has no errors.
func (r *Report) Valid() bool { return len(r.Errors) == 0 }

// Summary is one line for an error message: the first problems, and how
// many more there are.
func (r *Report) Summary() string {
	const shown = 3
	if len(r.Errors) <= shown {
		return strings.Join(r.Errors, "; ")
	}
	return fmt.Sprintf("%s; and %d more (run 'kubectl kubeadmcfg validate' for all)",
		strings.Join(r.Errors[:shown], "; "), len(r.Errors)-shown)
}

func (r *Report) errorf(format string, a ...any) {
	r.Errors = append(r.Errors, fmt.Sprintf(format, a...))
}

func (r *Report) addFieldErrors(errs field.ErrorList) {
	for _, e := range errs {
		msg := e.Error()
		if !slices.Contains(r.Errors, msg) {
			r.Errors = append(r.Errors, msg)
		}
	}
}

// Validate checks one ClusterConfiguration document the way kubeadm does:
// strict decoding against the schema of its apiVersion (unknown fields,
// duplicate keys, wrong types), kubeadm's defaults, then kubeadm's semantic
// checks. It never touches the network or the host.
func Validate(data []byte, opts ValidateOptions) *Report {
	r := newReport()
	if js, ok := strictJSON(data, r); ok {
		validateJSON(js, opts, r)
	}
	return r
}

// Validate checks the document as Validate checks its bytes. It starts from
// the tree the document already holds, so an edited document is not
// marshalled and parsed again to be checked.
func (d *Document) Validate(opts ValidateOptions) *Report {
	r := newReport()
	validateJSON(d.JSON(), opts, r)
	return r
}

func newReport() *Report { return &Report{Errors: []string{}, Warnings: []string{}} }

func validateJSON(js []byte, opts ValidateOptions, r *Report) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(js, &meta); err != nil {
		r.errorf("not a mapping: %v", err)
		return
	}
	r.APIVersion = meta.APIVersion
	if err := checkTypeMeta(meta.APIVersion, meta.Kind); err != nil {
		r.errorf("%v", err)
		return
	}
	rel, err := selectRelease(opts.KubeadmVersion, []string{meta.APIVersion})
	if err != nil {
		r.errorf("%v", err)
		return
	}
	if why := rel.checkAPIVersion(meta.APIVersion); why != "" {
		r.errorf("%s", why)
		return
	}
	validateCluster(js, meta.APIVersion, rel, r)
}

// validateCluster checks a ClusterConfiguration with a release's rules.
func validateCluster(js []byte, apiVersion string, rel *release, r *Report) {
	s, err := decodeStrict(js, apiVersion, r)
	if err != nil {
		r.errorf("%s", decodeError(err))
		return
	}
	if !r.Valid() {
		return
	}
	s.setDefaults()
	s.validate(r, rel)
}

// decodeError words a decoding type error by field path and JSON type,
// without the Go type names of the plugin's schema structs.
func decodeError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return err.Error()
	}
	var parts []string
	for _, part := range strings.Split(typeErr.Field, ".") {
		switch part {
		case "component", "componentV1beta3", "imageMeta", "TypeMeta":
			continue
		}
		parts = append(parts, part)
	}
	want := "a " + typeErr.Type.Kind().String()
	switch typeErr.Type.Kind() {
	case reflect.Slice:
		want = "a list"
		if typeErr.Type.Elem().Kind() == reflect.Struct {
			want = "a list of {name, value} entries"
		}
	case reflect.Map, reflect.Struct:
		want = "a mapping"
	case reflect.Bool:
		want = "a boolean"
	case reflect.String:
		want = "a string (quote it)"
	}
	got := map[string]string{"object": "a mapping", "array": "a list", "number": "a number", "bool": "a boolean", "string": "a string"}[typeErr.Value]
	if got == "" {
		got = typeErr.Value
	}
	return fmt.Sprintf("%s: got %s, want %s", strings.Join(parts, "."), got, want)
}
