package clusterconfig

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Edit is one change to a ClusterConfiguration, parsed once from what the
// user gave and applied as often as needed: a write that conflicts applies
// the same Edit again to the newer document, without parsing anything again.
// Apply must derive the change from the document it is given.
type Edit interface {
	Apply(d *Document) error
	// String names the edit for messages, as the user gave it.
	String() string
}

// Edits applies several edits in order, as one.
type Edits []Edit

// Apply runs every edit on d, stopping at the first error.
func (es Edits) Apply(d *Document) error {
	for _, e := range es {
		if err := e.Apply(d); err != nil {
			return err
		}
	}
	return nil
}

func (es Edits) String() string {
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.String()
	}
	return strings.Join(names, ", ")
}

// EditFunc adapts a function to an Edit, for programs that change the
// document in code rather than from a command line.
type EditFunc func(d *Document) error

// Apply calls f.
func (f EditFunc) Apply(d *Document) error { return f(d) }

func (EditFunc) String() string { return "edit" }

// ValueError is a --set value that is not YAML, on a field that does not
// hold a string.
type ValueError struct {
	Path Path
	Err  error
}

func (e *ValueError) Error() string { return fmt.Sprintf("bad value for %s: %v", e.Path, e.Err) }
func (e *ValueError) Unwrap() error { return e.Err }

// setEdit stores a value at a path.
type setEdit struct {
	path     Path
	text     string
	asString bool
	value    any   // text parsed as YAML, unless parseErr
	parseErr error // why text is not YAML; only an error where the field is not a string
}

// NewSet returns an edit that stores value at path. The value is parsed as
// YAML (30, true, [a,b], {k: v}) unless the document's schema says the field
// holds a string, in which case the text is stored as it is:
// apiServer.extraArgs.profiling=false stores "false". Component arguments are
// addressed by name on every apiVersion (see the package documentation).
func NewSet(path, value string) (Edit, error) { return newSet(path, value, false) }

// NewSetString returns an edit that stores value at path as a string,
// whatever it looks like.
func NewSetString(path, value string) (Edit, error) { return newSet(path, value, true) }

func newSet(rawPath, text string, asString bool) (Edit, error) {
	p, err := editablePath(rawPath)
	if err != nil {
		return nil, err
	}
	if !utf8.ValidString(text) {
		return nil, exitcode.Usagef("the value for %s is not valid UTF-8", p)
	}
	e := &setEdit{path: p, text: text, asString: asString}
	if !asString {
		e.value, e.parseErr = parseValue(text)
	}
	return e, nil
}

func (e *setEdit) String() string { return e.path.String() + "=" + e.text }

func (e *setEdit) Apply(d *Document) error {
	if err := d.checkEditable(e.path); err != nil {
		return err
	}
	if comp, name, ok := d.argPath(e.path); ok {
		return d.setArg(comp, name, e.text)
	}
	var value any = e.text
	if !e.asString && !d.schemaIsString(e.path) {
		if e.parseErr != nil {
			code := exitcode.Usage
			if input.Refused(e.parseErr) {
				code = exitcode.Invalid
			}
			return exitcode.New(code, &ValueError{Path: e.path, Err: e.parseErr})
		}
		value = cloneValue(e.value) // the tree must never share the edit's copy
	}
	return setIn(d.tree, e.path, value)
}

// unsetEdit removes a path.
type unsetEdit struct{ path Path }

// NewUnset returns an edit that removes path. A path that is already absent
// is not an error, so an unset can be repeated; on the argument list of
// v1beta4/v1 it removes every entry of that name.
func NewUnset(path string) (Edit, error) {
	p, err := editablePath(path)
	if err != nil {
		return nil, err
	}
	return &unsetEdit{path: p}, nil
}

func (e *unsetEdit) String() string { return "-" + e.path.String() }

func (e *unsetEdit) Apply(d *Document) error {
	if err := d.checkEditable(e.path); err != nil {
		return err
	}
	if comp, name, ok := d.argPath(e.path); ok {
		return d.unsetArg(comp, name)
	}
	return unsetIn(d.tree, e.path)
}

// mergePatch is an RFC 7386 JSON merge patch, decoded to JSON once.
type mergePatch struct{ js []byte }

// NewMergePatch returns an edit that applies an RFC 7386 JSON merge patch
// given as JSON or YAML.
func NewMergePatch(patch []byte) (Edit, error) {
	js, err := patchJSON(patch)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
		return nil, exitcode.Usagef("a merge patch must be a mapping")
	}
	return &mergePatch{js: js}, nil
}

func (e *mergePatch) String() string { return "merge patch " + string(e.js) }

func (e *mergePatch) Apply(d *Document) error {
	out, err := jsonpatch.MergePatch(d.JSON(), e.js)
	if err != nil {
		return exitcode.Usagef("cannot apply the merge patch: %w", err)
	}
	return d.replaceTree(out)
}

// jsonPatch is an RFC 6902 JSON patch, decoded once.
type jsonPatch struct{ ops jsonpatch.Patch }

// NewJSONPatch returns an edit that applies an RFC 6902 JSON patch given as
// JSON or YAML. When applied, a failing test operation is a precondition
// that does not hold (exit 4); an operation on a missing path is a bad patch
// (exit 2).
func NewJSONPatch(patch []byte) (Edit, error) {
	js, err := patchJSON(patch)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.DecodePatch(js)
	if err != nil {
		return nil, exitcode.Usagef("a JSON patch must be a list of operations: %w", err)
	}
	for i, op := range ops {
		if _, err := op.Path(); err != nil {
			return nil, exitcode.Usagef("json patch operation %d has no path", i)
		}
		switch op.Kind() {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			return nil, exitcode.Usagef("json patch operation %d: unknown op %q", i, op.Kind())
		}
	}
	return &jsonPatch{ops: ops}, nil
}

func (e *jsonPatch) String() string { return fmt.Sprintf("json patch of %d operations", len(e.ops)) }

func (e *jsonPatch) Apply(d *Document) error {
	out, err := e.ops.Apply(d.JSON())
	switch {
	case errors.Is(err, jsonpatch.ErrTestFailed):
		return exitcode.Conflictf("json patch: %w", err)
	case err != nil:
		return exitcode.Usagef("json patch: %w", err)
	}
	return d.replaceTree(out)
}

// The Document methods below apply one edit at once, for programs and tests
// that edit a document in hand.

// Set is NewSet applied to d.
func (d *Document) Set(path, value string) error { return apply(d)(NewSet(path, value)) }

// SetString is NewSetString applied to d.
func (d *Document) SetString(path, value string) error {
	return apply(d)(NewSetString(path, value))
}

// Unset is NewUnset applied to d.
func (d *Document) Unset(path string) error { return apply(d)(NewUnset(path)) }

// MergePatch is NewMergePatch applied to d.
func (d *Document) MergePatch(patch []byte) error { return apply(d)(NewMergePatch(patch)) }

// JSONPatch is NewJSONPatch applied to d.
func (d *Document) JSONPatch(patch []byte) error { return apply(d)(NewJSONPatch(patch)) }

func apply(d *Document) func(Edit, error) error {
	return func(e Edit, err error) error {
		if err != nil {
			return err
		}
		return e.Apply(d)
	}
}

func patchJSON(patch []byte) ([]byte, error) {
	if len(strings.TrimSpace(string(patch))) == 0 {
		return nil, exitcode.Usagef("the patch is empty")
	}
	js, err := input.YAMLToJSONStrict(patch)
	if input.Refused(err) {
		return nil, exitcode.Invalidf("the patch cannot be used: %w", err)
	}
	if err != nil {
		return nil, exitcode.Usagef("the patch is neither JSON nor YAML: %w", err)
	}
	return js, nil
}

// editablePath parses a path given for an edit.
func editablePath(raw string) (Path, error) {
	if !utf8.ValidString(raw) {
		return nil, exitcode.Usagef("the path %q is not valid UTF-8", raw)
	}
	return ParsePath(raw)
}

// checkEditable refuses edits of apiVersion and kind: the plugin never
// converts a document.
func (d *Document) checkEditable(p Path) error {
	if !p[0].IsList && (p[0].Key == "apiVersion" || p[0].Key == "kind") {
		return d.refuseTypeChange(p[0].Key)
	}
	return nil
}

func (d *Document) refuseTypeChange(key string) error {
	return exitcode.Usagef("changing %s is refused (the document stays %s %s)", key, d.APIVersion(), d.Kind())
}

// parseValue parses a --set value as YAML into a JSON value.
func parseValue(text string) (any, error) {
	js, err := input.YAMLToJSONStrict([]byte(text))
	if err != nil {
		return nil, err
	}
	var v any
	if err := unmarshalJSON(js, &v); err != nil {
		return nil, err
	}
	return v, nil
}
