package engine

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// DocumentResult reports a document write: the engine's result plus the
// document before and after the edit, and validation warnings.
type DocumentResult struct {
	Result
	Before   []byte
	After    []byte
	Warnings []string
}

// UpdateDocument applies edits, in order, to the ClusterConfiguration stored
// under Target.Key, validates the result, and writes it only if it changed.
// On a conflict the same edits are applied to the newer document.
func (e *Engine) UpdateDocument(ctx context.Context, edits ...clusterconfig.Edit) (*DocumentResult, error) {
	out := &DocumentResult{}
	var old *clusterconfig.Document // the document the write replaces, parsed once
	res, err := e.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		out.Warnings = nil
		raw, err := DocumentOf(cm, e.target)
		if err != nil {
			return false, err
		}
		out.Before, out.After = []byte(raw), []byte(raw)
		if old, err = clusterconfig.Parse([]byte(raw)); err != nil {
			return false, exitcode.Invalidf("the stored ClusterConfiguration cannot be edited: %w", err)
		}
		edited := old.Clone()
		if err := clusterconfig.Edits(edits).Apply(edited); err != nil {
			return false, err
		}
		if edited.Equal(old) {
			return false, nil
		}
		data, err := edited.Marshal()
		if err != nil {
			return false, exitcode.Usagef("the edited document cannot be stored: %w", err)
		}
		return true, e.store(cm, data, edited.Validate, out)
	}, e.backup(out, func() *clusterconfig.Document { return old }))
	backedUp := out.Backup // where the backup hook wrote, recorded on out
	out.Result = *res
	out.Backup = backedUp
	return out, err
}

// ReplaceDocument writes data, byte for byte, as the document under
// Target.Key (restore). check runs on every freshly read copy before the
// write, so a precondition is checked against the document actually
// replaced, even after a conflict.
func (e *Engine) ReplaceDocument(ctx context.Context, data []byte, check func(cm *corev1.ConfigMap) error) (*DocumentResult, error) {
	out := &DocumentResult{}
	validate := func(opts clusterconfig.ValidateOptions) *clusterconfig.Report {
		return clusterconfig.Validate(data, opts)
	}
	var raw string
	res, err := e.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		out.Warnings = nil
		raw = cm.Data[e.target.Key]
		out.Before, out.After = []byte(raw), []byte(raw)
		if err := check(cm); err != nil {
			return false, err
		}
		if raw == string(data) {
			return false, nil
		}
		return true, e.store(cm, data, validate, out)
	}, e.backup(out, func() *clusterconfig.Document {
		doc, _ := clusterconfig.Parse([]byte(raw)) // a live document that does not parse is what a restore is for
		return doc
	}))
	backedUp := out.Backup // where the backup hook wrote, recorded on out
	out.Result = *res
	out.Backup = backedUp
	return out, err
}

// backup returns the hook that backs up the document a write replaces and
// records where it went; nil without a Backuper.
func (e *Engine) backup(out *DocumentResult, parsed func() *clusterconfig.Document) beforeWrite {
	if e.opts.Backup == nil {
		return nil
	}
	return func(ctx context.Context, cm *corev1.ConfigMap) error {
		path, err := e.opts.Backup.Backup(ctx, cm, e.target.Key, parsed())
		if err != nil {
			return exitcode.New(exitcode.FromError(err), &BackupError{Err: err})
		}
		if path != "" {
			out.Backup = path
		}
		return nil
	}
}

// BackupError is a backup that failed before a write, which therefore did
// not happen.
type BackupError struct{ Err error }

func (e *BackupError) Error() string {
	return "backup before writing failed, nothing was written: " + e.Err.Error()
}
func (e *BackupError) Unwrap() error { return e.Err }

// store validates data and puts it in cm.
func (e *Engine) store(cm *corev1.ConfigMap, data []byte, validate func(clusterconfig.ValidateOptions) *clusterconfig.Report, out *DocumentResult) error {
	if e.opts.Validation != ValidationIgnore {
		report := validate(e.opts.Validate)
		out.Warnings = append(out.Warnings, report.Warnings...)
		if !report.Valid() {
			if e.opts.Validation == ValidationStrict {
				return exitcode.Invalidf("the result would be invalid, nothing was written: %s", report.Summary())
			}
			out.Warnings = append(out.Warnings, report.Errors...)
		}
	}
	out.After = data
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[e.target.Key] = string(data)
	if size := configMapSize(cm); size > maxConfigMapBytes {
		return exitcode.Invalidf("the result would make %s %d bytes, over the ConfigMap limit of %d; nothing was written",
			e.target, size, maxConfigMapBytes)
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
