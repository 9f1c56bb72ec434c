package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Validation is kubectl's --validate: strict refuses to write an invalid
// document, warn writes it and reports the problems, ignore skips the check.
type Validation string

// The --validate values.
const (
	ValidationStrict Validation = "strict"
	ValidationWarn   Validation = "warn"
	ValidationIgnore Validation = "ignore"
)

// DocumentOptions tune a document write.
type DocumentOptions struct {
	Validation Validation
	Validate   clusterconfig.ValidateOptions
}

// DocumentResult reports a document write: the engine's result plus the
// document before and after the edit, and validation warnings.
type DocumentResult struct {
	*Result
	Before   []byte
	After    []byte
	Warnings []string
}

// Edit changes a freshly read document. Like Mutate it may run more than
// once, each time on a newer document.
type Edit func(doc *clusterconfig.Document) error

// UpdateDocument applies edit to the ClusterConfiguration stored under
// Target.Key, validates the result, and writes it only if it changed.
func (e *Engine) UpdateDocument(ctx context.Context, edit Edit, opts DocumentOptions) (*DocumentResult, error) {
	out := &DocumentResult{}
	res, err := e.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		out.Warnings = nil
		raw, err := Document(cm, e.Target)
		if err != nil {
			return false, err
		}
		out.Before, out.After = []byte(raw), []byte(raw)
		doc, err := clusterconfig.Parse([]byte(raw))
		if err != nil {
			return false, exitcode.Invalidf("the stored ClusterConfiguration cannot be edited: %w", err)
		}
		edited := doc.Clone()
		if err := edit(edited); err != nil {
			return false, err
		}
		if edited.Equal(doc) {
			return false, nil
		}
		data, err := edited.Marshal()
		if err != nil {
			return false, err
		}
		return true, e.store(cm, data, opts, out)
	})
	out.Result = res
	return out, err
}

// ReplaceDocument writes data, byte for byte, as the document under
// Target.Key (restore). check runs on every freshly read copy before the
// write, so a precondition is checked against the document actually
// replaced, even after a conflict.
func (e *Engine) ReplaceDocument(ctx context.Context, data []byte, check func(cm *corev1.ConfigMap) error, opts DocumentOptions) (*DocumentResult, error) {
	out := &DocumentResult{}
	res, err := e.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		out.Warnings = nil
		raw := cm.Data[e.Target.Key]
		out.Before, out.After = []byte(raw), []byte(raw)
		if err := check(cm); err != nil {
			return false, err
		}
		if raw == string(data) {
			return false, nil
		}
		return true, e.store(cm, data, opts, out)
	})
	out.Result = res
	return out, err
}

// store validates data and puts it in cm.
func (e *Engine) store(cm *corev1.ConfigMap, data []byte, opts DocumentOptions, out *DocumentResult) error {
	if opts.Validation != ValidationIgnore {
		report := clusterconfig.Validate(data, opts.Validate)
		out.Warnings = append(out.Warnings, report.Warnings...)
		if !report.Valid() {
			if opts.Validation == ValidationStrict {
				return exitcode.Invalidf("the result would be invalid, nothing was written: %s", report.Summary())
			}
			out.Warnings = append(out.Warnings, report.Errors...)
		}
	}
	out.After = data
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[e.Target.Key] = string(data)
	if size := configMapSize(cm); size > maxConfigMapBytes {
		return exitcode.Invalidf("the result would make %s %d bytes, over the ConfigMap limit of %d; nothing was written",
			e.Target, size, maxConfigMapBytes)
	}
	return nil
}

// maxConfigMapBytes is the apiserver's limit on a ConfigMap's data.
const maxConfigMapBytes = 1 << 20

func configMapSize(cm *corev1.ConfigMap) int {
	n := 0
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		n += len(k) + len(v)
	}
	return n
}

// Describe is the one-line human summary of a document write, such as
// "kubeadm-config patched (resourceVersion 812 -> 815, 2 attempts)".
func (r *DocumentResult) Describe(name, verb string) string {
	switch {
	case !r.Changed:
		return name + " unchanged"
	case r.DryRun == DryRunClient:
		return fmt.Sprintf("%s %s (dry run: nothing sent)", name, verb)
	case r.DryRun == DryRunServer:
		return fmt.Sprintf("%s %s (server dry run: nothing written, resourceVersion %s)", name, verb, r.Old.ResourceVersion)
	}
	return fmt.Sprintf("%s %s %s", name, verb, r.Result)
}
