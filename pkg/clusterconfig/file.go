package clusterconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// FileDocument is one document of a multi-document kubeadm config file.
type FileDocument struct {
	Index      int    `json:"index"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Data       []byte `json:"-"`
}

// SplitFile splits a kubeadm config file on "---" lines, the way kubeadm
// does, and reads each document's apiVersion and kind. Empty documents are
// skipped.
func SplitFile(data []byte) ([]FileDocument, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []FileDocument
	for i := 0; ; i++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if isBlank(chunk) {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(chunk, &meta); err != nil {
			return nil, fmt.Errorf("document %d is not YAML: %w", i+1, err)
		}
		docs = append(docs, FileDocument{Index: len(docs) + 1, APIVersion: meta.APIVersion, Kind: meta.Kind, Data: chunk})
	}
}

func isBlank(chunk []byte) bool {
	for _, line := range strings.Split(string(chunk), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// FileReport is the outcome of validating a kubeadm config file: the report
// on its ClusterConfiguration, problems with the file as a whole, and the
// documents that were recognised but not checked.
type FileReport struct {
	Report
	NotChecked []FileDocument `json:"notChecked"`
}

// knownKinds are the documents kubeadm accepts in a config file, by
// apiVersion.
var knownKinds = map[string][]string{
	V1beta4:                            {"InitConfiguration", Kind, "JoinConfiguration", "ResetConfiguration", "UpgradeConfiguration"},
	V1:                                 {"InitConfiguration", Kind, "JoinConfiguration", "ResetConfiguration", "UpgradeConfiguration"},
	V1beta3:                            {"InitConfiguration", Kind, "JoinConfiguration"},
	"kubelet.config.k8s.io/v1beta1":    {"KubeletConfiguration"},
	"kubeproxy.config.k8s.io/v1alpha1": {"KubeProxyConfiguration"},
}

// ValidateFile validates the ClusterConfiguration of a multi-document kubeadm
// config file. Like kubeadm, it refuses documents of unknown kinds, a kind
// given twice, and a file without a ClusterConfiguration.
func ValidateFile(data []byte, opts ValidateOptions) *FileReport {
	fr := &FileReport{Report: Report{Errors: []string{}, Warnings: []string{}}, NotChecked: []FileDocument{}}
	docs, err := SplitFile(data)
	if err != nil {
		fr.errorf("%v", err)
		return fr
	}
	seen := map[string]bool{}
	var cluster *FileDocument
	for i, d := range docs {
		switch {
		case d.APIVersion == "" || d.Kind == "":
			fr.errorf("document %d: apiVersion and kind are required", d.Index)
			continue
		case !slices.Contains(knownKinds[d.APIVersion], d.Kind):
			fr.errorf("document %d: unknown configuration API %s, kind %s", d.Index, d.APIVersion, d.Kind)
			continue
		case seen[d.Kind]:
			fr.errorf("document %d: kind %s is given twice", d.Index, d.Kind)
			continue
		}
		seen[d.Kind] = true
		if d.Kind == Kind {
			cluster = &docs[i]
		} else {
			fr.NotChecked = append(fr.NotChecked, d)
		}
	}
	if cluster == nil {
		if len(fr.Errors) == 0 {
			fr.errorf("the file has no ClusterConfiguration document")
		}
		return fr
	}
	r := Validate(cluster.Data, opts)
	fr.APIVersion = r.APIVersion
	fr.Errors = append(fr.Errors, r.Errors...)
	fr.Warnings = append(fr.Warnings, r.Warnings...)
	return fr
}
