package clusterconfig

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
)

// Splitting a kubeadm config file into documents exactly as kubeadm does
// (apimachinery's YAMLReader, then the apiVersion and kind of each chunk),
// keeping the line each document starts on so problems can say where.

// FileDocument is one document of a multi-document kubeadm config file.
type FileDocument struct {
	Index      int    `json:"index"`
	Line       int    `json:"line"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Data       []byte `json:"-"`
	// Problem is why kubeadm refuses the document before reading it (empty,
	// no apiVersion or kind, not YAML, a kind given twice), or "".
	Problem string `json:"-"`
}

func (d *FileDocument) where() string { return fmt.Sprintf("document %d (line %d)", d.Index, d.Line) }

// splitChunks cuts data where YAMLReader does: a line starting with "---"
// followed by nothing but spaces or a comment ends a non-empty document.
// (A "---" with nothing before it belongs to the next document, so "---"
// twice in a row makes no empty document, while "---" then a blank or
// comment line does.)
func splitChunks(data []byte) (chunks [][]byte, lines []int, err error) {
	var buf bytes.Buffer
	start := 0
	text := string(data)
	n := 0
	for len(text) > 0 {
		line, rest, ended := strings.Cut(text, "\n")
		text = rest
		n++
		if ended { // bufio's ReadLine drops "\r\n", but keeps a final "\r"
			line = strings.TrimSuffix(line, "\r")
		}
		if strings.HasPrefix(line, "---") {
			trimmed := strings.TrimSpace(line[3:])
			if trimmed != "" && trimmed[0] != '#' {
				return nil, nil, fmt.Errorf("line %d: invalid YAML document separator: %s", n, trimmed)
			}
			if buf.Len() != 0 {
				chunks, lines = append(chunks, bytes.Clone(buf.Bytes())), append(lines, start)
				buf.Reset()
				continue
			}
		}
		if buf.Len() == 0 {
			start = n
		}
		buf.WriteString(line + "\n")
	}
	if buf.Len() != 0 {
		chunks, lines = append(chunks, bytes.Clone(buf.Bytes())), append(lines, start)
	}
	return chunks, lines, nil
}

// SplitFile splits a kubeadm config file into its documents. A document
// kubeadm refuses before reading it has its Problem set, and so does one
// whose YAML aliases expand it past the bound of package input, which the
// plugin refuses; err is a file that cannot be split at all, or one larger
// than 2 MiB.
func SplitFile(data []byte) ([]FileDocument, error) {
	if len(data) > input.MaxBytes {
		return nil, fmt.Errorf("the file is %w", input.ErrTooLarge)
	}
	chunks, lines, err := splitChunks(data)
	if err != nil {
		return nil, err
	}
	docs := make([]FileDocument, 0, len(chunks))
	seen := map[string]int{}
	for i, chunk := range chunks {
		d := FileDocument{Index: i + 1, Line: lines[i], Data: chunk}
		d.Line += leadingSeparators(chunk)
		var meta struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
		}
		var gv schema.GroupVersion
		if err = input.Unmarshal(chunk, &meta); err == nil {
			gv, err = schema.ParseGroupVersion(meta.APIVersion)
		}
		d.APIVersion, d.Kind = meta.APIVersion, meta.Kind
		var expansion *input.ExpansionError
		switch {
		case errors.As(err, &expansion):
			inFile := *expansion
			inFile.Line += lines[i] - 1
			d.Problem = fmt.Sprintf("%s: %v", d.where(), &inFile)
		case err != nil:
			d.Problem = fmt.Sprintf("%s: cannot read its apiVersion and kind: %v", d.where(), err)
		case isEmptyDocument(chunk):
			d.Problem = fmt.Sprintf("%s is empty (nothing but comments or blank lines): kubeadm refuses the file, as every document needs apiVersion and kind; remove the empty document or its \"---\"", d.where())
		case gv.Group == "" || gv.Version == "" || meta.Kind == "":
			d.Problem = fmt.Sprintf("%s: kind and apiVersion (with a group) are mandatory, got apiVersion %q, kind %q", d.where(), meta.APIVersion, meta.Kind)
		case seen[meta.Kind] > 0:
			d.Problem = fmt.Sprintf("%s: kind %s is given twice (first in document %d)", d.where(), meta.Kind, seen[meta.Kind])
		default:
			seen[meta.Kind] = d.Index
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// leadingSeparators counts the "---" lines a chunk starts with, so its line
// is the first line of content.
func leadingSeparators(chunk []byte) int {
	n := 0
	for _, line := range strings.Split(string(chunk), "\n") {
		if !strings.HasPrefix(line, "---") {
			break
		}
		n++
	}
	return n
}

// isEmptyDocument reports whether a chunk holds no YAML value at all.
func isEmptyDocument(chunk []byte) bool {
	js, err := input.YAMLToJSON(chunk)
	return err == nil && string(bytes.TrimSpace(js)) == "null"
}
