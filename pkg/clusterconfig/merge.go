package clusterconfig

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// threeWayMerge is the change someone made by turning one version of the
// document into another (in an editor, say), kept as an RFC 7386 merge patch
// so it can be applied to whatever the document has become since.
type threeWayMerge struct {
	original []byte         // the version the change started from, as JSON
	edited   *Document      // the changed version
	patch    []byte         // original -> edited
	changes  map[string]any // patch, decoded with exact numbers
}

// NewThreeWayMerge returns the change that turns original into edited as an
// edit that can be applied to a newer version of the document: a three-way
// merge of the original, the edited and the live version. Fields only the
// edit changed take the edited value, fields only the live version changed
// keep the live value, and a field both changed to different values is a
// conflict (a *MergeConflictError, exit 4): neither side is overwritten.
//
// Mappings merge key by key; a list is one value, as in a JSON merge patch,
// so two different changes to the same list conflict even when they touch
// different entries. Changing apiVersion or kind is refused (exit 2).
func NewThreeWayMerge(original, edited *Document) (Edit, error) {
	for _, key := range []string{"apiVersion", "kind"} {
		if !reflect.DeepEqual(original.tree[key], edited.tree[key]) {
			return nil, original.refuseTypeChange(key)
		}
	}
	o := original.JSON()
	patch, err := jsonpatch.CreateMergePatch(o, edited.JSON())
	if err != nil {
		return nil, fmt.Errorf("compare the edited document: %w", err)
	}
	var changes map[string]any
	if err := unmarshalJSON(patch, &changes); err != nil {
		return nil, fmt.Errorf("compare the edited document: %w", err)
	}
	return &threeWayMerge{original: o, edited: edited.Clone(), patch: patch, changes: changes}, nil
}

func (e *threeWayMerge) String() string { return "edit " + string(e.patch) }

// Apply merges the change into d, the live version.
func (e *threeWayMerge) Apply(d *Document) error {
	live := d.JSON()
	theirs, err := jsonpatch.CreateMergePatch(e.original, live)
	if err != nil {
		return fmt.Errorf("compare the live document: %w", err)
	}
	var theirChanges map[string]any
	if err := unmarshalJSON(theirs, &theirChanges); err != nil {
		return fmt.Errorf("compare the live document: %w", err)
	}
	if paths := conflicting(e.changes, theirChanges, nil); len(paths) > 0 {
		return exitcode.New(exitcode.Conflict, e.conflict(d, paths))
	}
	out, err := jsonpatch.MergePatch(live, e.patch)
	if err != nil {
		return exitcode.Usagef("cannot apply the edit: %w", err)
	}
	return d.replaceTree(out)
}

// conflicting returns the paths that both merge patches change, to values
// that differ. Where both change a mapping the merge goes key by key, as RFC
// 7386 merges; anywhere else (scalars, lists, a mapping against a scalar or a
// removal) the two values must be equal. Values are compared exactly: a list
// holding mappings is replaced whole by a merge patch, so a key one side
// added inside an entry would be lost if the other side's list won.
// (apimachinery's mergepatch.HasConflicts compares mappings inside lists by
// one side's keys only, and cannot name the fields, so it is not used here.)
func conflicting(mine, theirs map[string]any, prefix Path) []Path {
	var out []Path
	keys := make([]string, 0, len(mine))
	for k := range mine {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t, ok := theirs[k]
		if !ok {
			continue
		}
		p := append(slices.Clip(prefix), Step{Key: k})
		m := mine[k]
		mm, mineIsMap := m.(map[string]any)
		tm, theirsIsMap := t.(map[string]any)
		switch {
		case mineIsMap && theirsIsMap:
			out = append(out, conflicting(mm, tm, p)...)
		case !reflect.DeepEqual(m, t):
			out = append(out, p)
		}
	}
	return out
}

// conflict describes the conflicting fields and builds the live document
// with every other part of the change applied.
func (e *threeWayMerge) conflict(live *Document, paths []Path) *MergeConflictError {
	var original map[string]any
	_ = unmarshalJSON(e.original, &original) // marshalled from a tree moments ago
	err := &MergeConflictError{}
	rest := cloneValue(e.changes).(map[string]any)
	for _, p := range paths {
		err.Conflicts = append(err.Conflicts, FieldConflict{
			Path:     p,
			Original: showValue(original, p),
			Edited:   showValue(e.edited.tree, p),
			Live:     showValue(live.tree, p),
		})
		removeIn(rest, p)
	}
	merged := live.Clone()
	js, _ := json.Marshal(rest)
	if out, perr := jsonpatch.MergePatch(live.JSON(), js); perr == nil {
		var tree map[string]any
		if unmarshalJSON(out, &tree) == nil && tree != nil {
			merged.tree = tree
		}
	}
	err.Merged = merged
	return err
}

// removeIn deletes the key at p from a tree of mappings, and the mappings
// it leaves empty.
func removeIn(tree map[string]any, p Path) {
	if len(p) == 1 {
		delete(tree, p[0].Key)
		return
	}
	child, ok := tree[p[0].Key].(map[string]any)
	if !ok {
		return
	}
	removeIn(child, p[1:])
	if len(child) == 0 {
		delete(tree, p[0].Key)
	}
}

// showValue renders the value at p for a message: compact JSON, or
// "(absent)".
func showValue(tree map[string]any, p Path) string {
	v, found, err := getIn(tree, p)
	if err != nil || !found {
		return "(absent)"
	}
	js, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(js)
}

// FieldConflict is one field changed both by an edit and, meanwhile, on the
// live document, to different values. The values are shown as compact JSON,
// or "(absent)".
type FieldConflict struct {
	Path     Path
	Original string // before either change
	Edited   string // the edit's value
	Live     string // the live document's value
}

func (c FieldConflict) String() string {
	return fmt.Sprintf("%s: was %s, edited %s, live %s", c.Path, c.Original, c.Edited, c.Live)
}

// MergeConflictError is a three-way merge that found the same fields
// changed on both sides. Nothing was merged.
type MergeConflictError struct {
	Conflicts []FieldConflict
	// Merged is the live document with every part of the edit that does
	// not conflict applied, and the live value in each conflicting field:
	// a starting point for resolving the conflict by hand.
	Merged *Document
}

func (e *MergeConflictError) Error() string {
	parts := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		parts[i] = c.String()
	}
	return "the same fields were changed in the edit and on the live document: " + strings.Join(parts, "; ")
}
