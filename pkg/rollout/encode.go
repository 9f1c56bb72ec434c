package rollout

import (
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
)

// The record in a ConfigMap's data, within its size bound, and what tells
// a damaged one.

// DamagedError is a record that cannot be read as the transitions write
// it: hand-edited YAML, an unknown field, a document that does not match
// its hash, a rule broken. No agent acts on such a record; an operator
// fixes or deletes it.
type DamagedError struct {
	// ConfigMap is the record's namespace/name.
	ConfigMap string
	// Key is the damaged data key; empty for the whole record.
	Key string
	Err error
}

func (e *DamagedError) Error() string {
	where := ""
	if e.Key != "" {
		where = "data." + e.Key + ": "
	}
	return fmt.Sprintf("the rollout record %s is damaged: %s%v; fix or delete it", e.ConfigMap, where, e.Err)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// FromConfigMap reads the record stored in cm's data. A ConfigMap without
// a status (or a new, empty one) is the empty record. A damaged record is
// an error with exit code 3 that wraps a *DamagedError.
func FromConfigMap(cm *corev1.ConfigMap) (*Record, error) {
	name := cm.Namespace + "/" + cm.Name
	damaged := func(key string, err error) error {
		return exitcode.New(exitcode.Invalid, &DamagedError{ConfigMap: name, Key: key, Err: err})
	}
	data := cm.Data
	if size := dataBytes(data); size > MaxRecordBytes {
		return nil, damaged("", fmt.Errorf("it holds %d bytes, more than the %d a record may hold", size, MaxRecordBytes))
	}
	r := &Record{}
	if v, ok := data[KeyHistory]; ok {
		if err := unmarshalStrict(v, &r.History); err != nil {
			return nil, damaged(KeyHistory, err)
		}
	}
	status, ok := data[KeyStatus]
	if !ok {
		for _, key := range []string{KeyTarget, KeyPrevious} {
			if _, found := data[key]; found {
				return nil, damaged(KeyStatus, fmt.Errorf("missing, but data.%s is present", key))
			}
		}
		return r, nil
	}
	r.Status = &Status{}
	if err := unmarshalStrict(status, r.Status); err != nil {
		return nil, damaged(KeyStatus, err)
	}
	if err := r.Status.check(); err != nil {
		return nil, damaged(KeyStatus, err)
	}
	var err error
	if r.Target, err = document(data, KeyTarget, &r.Status.Target); err != nil {
		return nil, damaged(KeyTarget, err)
	}
	if r.Previous, err = document(data, KeyPrevious, r.Status.Previous); err != nil {
		return nil, damaged(KeyPrevious, err)
	}
	return r, nil
}

// document reads the document at key, which must be there exactly when the
// status names it, with the hash the status records.
func document(data map[string]string, key string, ref *Ref) ([]byte, error) {
	v, ok := data[key]
	switch {
	case ref == nil && ok:
		return nil, errors.New("present, but the status records no such document")
	case ref == nil:
		return nil, nil
	case !ok:
		return nil, fmt.Errorf("missing, but the status records %s", ref.Hash)
	}
	if h := Hash([]byte(v)); h != ref.Hash {
		return nil, fmt.Errorf("the document's hash is %s, but the status records %s", h, ref.Hash)
	}
	return []byte(v), nil
}

// unmarshalStrict reads YAML the record holds, refusing unknown fields and
// keys given twice. The record is bounded by MaxRecordBytes before.
func unmarshalStrict(data string, v any) error {
	return input.UnmarshalStrict([]byte(data), v)
}

// ToConfigMap stores the record in cm's data, labelled as managed by the
// plugin, and leaves other keys as they are. A record that breaks a rule,
// or that would pass MaxRecordBytes, is refused (exit 3) and cm is left
// unchanged.
func (r *Record) ToConfigMap(cm *corev1.ConfigMap) error {
	data := maps.Clone(cm.Data)
	if data == nil {
		data = map[string]string{}
	}
	if err := r.encode(data); err != nil {
		return err
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[managed.Label] = managed.By
	cm.Data = data
	return nil
}

func (r *Record) encode(data map[string]string) error {
	for _, key := range []string{KeyTarget, KeyPrevious, KeyStatus, KeyHistory} {
		delete(data, key)
	}
	if len(r.History) > HistoryLength {
		r.History = r.History[len(r.History)-HistoryLength:]
	}
	if len(r.History) > 0 {
		history, err := yaml.Marshal(r.History)
		if err != nil {
			return exitcode.Failuref("encode the rollout history: %w", err)
		}
		data[KeyHistory] = string(history)
	}
	if s := r.Status; s != nil {
		if err := r.consistent(); err != nil {
			return exitcode.Invalidf("refusing to write a rollout record that breaks its rules: %w", err)
		}
		status, err := yaml.Marshal(s)
		if err != nil {
			return exitcode.Failuref("encode the rollout status: %w", err)
		}
		data[KeyStatus], data[KeyTarget] = string(status), string(r.Target)
		if s.Previous != nil {
			data[KeyPrevious] = string(r.Previous)
		}
	}
	if size := dataBytes(data); size > MaxRecordBytes {
		return exitcode.Invalidf("the documents are too large for the rollout record: it would hold %d bytes, more than %d "+
			"(target %d bytes, previous %d); nothing was written", size, MaxRecordBytes, len(r.Target), len(r.Previous))
	}
	return nil
}

// consistent checks the status's rules and that the documents are those it
// names.
func (r *Record) consistent() error {
	s := r.Status
	if err := s.check(); err != nil {
		return err
	}
	if h := Hash(r.Target); h != s.Target.Hash {
		return fmt.Errorf("the target document's hash is %s, but the status records %s", h, s.Target.Hash)
	}
	if s.Previous != nil && Hash(r.Previous) != s.Previous.Hash {
		return fmt.Errorf("the previous document's hash is %s, but the status records %s", Hash(r.Previous), s.Previous.Hash)
	}
	return nil
}

func dataBytes(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

// Apply runs change on the record stored in cm and, when it changed, stores
// the result in cm. It is meant to run inside a compare-and-swap write of
// the record (engine.Update's Mutate), so that change sees the record
// actually replaced. It returns the record after change, and whether cm
// was changed.
func Apply(cm *corev1.ConfigMap, change func(r *Record) (changed bool, err error)) (*Record, bool, error) {
	r, err := FromConfigMap(cm)
	if err != nil {
		return nil, false, err
	}
	changed, err := change(r)
	if err != nil || !changed {
		return r, false, err
	}
	if err := r.ToConfigMap(cm); err != nil {
		return r, false, err
	}
	return r, true, nil
}
