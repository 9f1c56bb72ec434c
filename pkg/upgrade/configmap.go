package upgrade

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
)

// DefaultConfigMap is the name of the ConfigMap that holds the upgrade
// state, in kube-system unless told otherwise.
const DefaultConfigMap = "kubeadmcfg-upgrade"

// ErrNoUpgrade is returned (with exit code 5) by operations that need a
// recorded upgrade when there is none.
var ErrNoUpgrade = errors.New("no upgrade is recorded")

// Op changes an upgrade record. rec is nil when no upgrade is recorded. It
// returns the record to store and whether anything changed. Inside a
// compare-and-swap write it may run more than once, each time on the
// record actually stored.
type Op func(rec *Record) (next *Record, changed bool, err error)

// Existing makes an Op of a change that needs a recorded upgrade.
func Existing(change func(rec *Record) (changed bool, err error)) Op {
	return func(rec *Record) (*Record, bool, error) {
		if rec == nil {
			return nil, false, exitcode.New(exitcode.NotFound, ErrNoUpgrade)
		}
		changed, err := change(rec)
		return rec, changed, err
	}
}

// Change is what an Op did.
type Change struct {
	// Before is the state before the op, "" when no upgrade was recorded.
	Before State
	// After is the record after the op (nil when none is recorded).
	After   *Record
	Changed bool
}

// FromConfigMap reads the record stored on the state ConfigMap. ok is false
// when no upgrade is recorded there.
func FromConfigMap(cm *corev1.ConfigMap) (rec *Record, ok bool, err error) {
	return Decode(cm.Annotations)
}

// Apply runs op on the record stored on cm and, when it changed, stores the
// result on cm, labelled as managed by the plugin. It is meant to run inside
// a compare-and-swap write of cm.
func Apply(cm *corev1.ConfigMap, op Op) (Change, error) {
	rec, _, err := FromConfigMap(cm)
	if err != nil {
		return Change{}, err
	}
	var c Change
	if rec != nil {
		c.Before = rec.State // op may change rec in place
	}
	next, changed, err := op(rec)
	if err != nil || !changed {
		c.After = rec
		return c, err
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[managed.Label] = managed.By
	if err := next.Encode(cm.Annotations); err != nil {
		c.After = rec
		return c, err
	}
	c.After, c.Changed = next, true
	return c, nil
}
