package clusterconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// argComponents are the paths whose extraArgs can be addressed by argument
// name on both shapes (the v1beta3 map and the v1beta4/v1 list).
var argComponents = [][]string{{"apiServer"}, {"controllerManager"}, {"scheduler"}, {"etcd", "local"}}

// Set stores value at path. The value is parsed as YAML (30, true, [a,b],
// {k: v}) unless the schema says the field holds a string, in which case the
// text is stored as it is: apiServer.extraArgs.profiling=false stores "false".
func (d *Document) Set(path, value string) error {
	return d.set(path, value, false)
}

// SetString stores value at path as a string, whatever it looks like.
func (d *Document) SetString(path, value string) error {
	return d.set(path, value, true)
}

func (d *Document) set(rawPath, text string, forceString bool) error {
	p, err := d.editablePath(rawPath)
	if err != nil {
		return err
	}
	if !utf8.ValidString(text) {
		return exitcode.Usagef("the value for %s is not valid UTF-8", p)
	}
	if comp, name, ok := d.argPath(p); ok {
		return d.setArg(comp, name, text)
	}
	var value any = text
	if !forceString && !d.schemaIsString(p) {
		if value, err = parseValue(text); err != nil {
			return exitcode.Usagef("bad value for %s: %w (use --set-string to store it as text)", p, err)
		}
	}
	return setIn(d.tree, p, value)
}

// Unset removes path. A path that is already absent is not an error, so an
// unset can be repeated; on the argument list of v1beta4/v1 it removes every
// entry of that name.
func (d *Document) Unset(rawPath string) error {
	p, err := d.editablePath(rawPath)
	if err != nil {
		return err
	}
	if comp, name, ok := d.argPath(p); ok {
		return d.unsetArg(comp, name)
	}
	return unsetIn(d.tree, p)
}

// MergePatch applies an RFC 7386 JSON merge patch given as JSON or YAML.
func (d *Document) MergePatch(patch []byte) error {
	js, err := decodeMergePatch(patch)
	if err != nil {
		return err
	}
	out, err := jsonpatch.MergePatch(d.JSON(), js)
	if err != nil {
		return exitcode.Usagef("cannot apply the merge patch: %w", err)
	}
	return d.replaceTree(out)
}

// JSONPatch applies an RFC 6902 JSON patch given as JSON or YAML. A failing
// test operation is a precondition that does not hold (exit 4); an operation
// on a missing path is a bad patch (exit 2).
func (d *Document) JSONPatch(patch []byte) error {
	ops, err := decodeJSONPatch(patch)
	if err != nil {
		return err
	}
	out, err := ops.Apply(d.JSON())
	switch {
	case errors.Is(err, jsonpatch.ErrTestFailed):
		return exitcode.Conflictf("json patch: %w", err)
	case err != nil:
		return exitcode.Usagef("json patch: %w", err)
	}
	return d.replaceTree(out)
}

// CheckPatch reports whether patch is well formed, without applying it, so
// a bad patch is refused before the cluster is contacted.
func CheckPatch(patch []byte, jsonPatch bool) error {
	var err error
	if jsonPatch {
		_, err = decodeJSONPatch(patch)
	} else {
		_, err = decodeMergePatch(patch)
	}
	return err
}

func decodeMergePatch(patch []byte) ([]byte, error) {
	js, err := patchJSON(patch)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
		return nil, exitcode.Usagef("a merge patch must be a mapping")
	}
	return js, nil
}

func decodeJSONPatch(patch []byte) (jsonpatch.Patch, error) {
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
	return ops, nil
}

func patchJSON(patch []byte) ([]byte, error) {
	if len(strings.TrimSpace(string(patch))) == 0 {
		return nil, exitcode.Usagef("the patch is empty")
	}
	js, err := yaml.YAMLToJSONStrict(patch)
	if err != nil {
		return nil, exitcode.Usagef("the patch is neither JSON nor YAML: %w", err)
	}
	return js, nil
}

func (d *Document) editablePath(raw string) (Path, error) {
	if !utf8.ValidString(raw) {
		return nil, exitcode.Usagef("the path %q is not valid UTF-8", raw)
	}
	p, err := ParsePath(raw)
	if err != nil {
		return nil, err
	}
	if !p[0].IsList && (p[0].Key == "apiVersion" || p[0].Key == "kind") {
		return nil, exitcode.Usagef("changing %s is refused (the document stays %s %s)", p[0].Key, d.APIVersion(), d.Kind())
	}
	return p, nil
}

// parseValue parses a --set value as YAML into a JSON value.
func parseValue(text string) (any, error) {
	js, err := yaml.YAMLToJSONStrict([]byte(text))
	if err != nil {
		return nil, err
	}
	var v any
	if err := unmarshalJSON(js, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// argPath reports whether p addresses one component argument by name, such
// as apiServer.extraArgs.audit-log-maxage, on a document whose extraArgs are
// lists. (On v1beta3 the map is edited as any other map.)
func (d *Document) argPath(p Path) (comp []string, name string, ok bool) {
	if d.APIVersion() == V1beta3 {
		return nil, "", false
	}
	for _, c := range argComponents {
		if len(p) != len(c)+2 {
			continue
		}
		match := p[len(c)].Key == "extraArgs" && !p[len(c)].IsList && !p[len(c)+1].IsList
		for i, k := range c {
			match = match && !p[i].IsList && p[i].Key == k
		}
		if match {
			return c, p[len(c)+1].Key, true
		}
	}
	return nil, "", false
}

func argsPath(comp []string) Path {
	var p Path
	for _, k := range comp {
		p = append(p, Step{Key: k})
	}
	return append(p, Step{Key: "extraArgs"})
}

// argList returns the component's extraArgs list (nil when absent).
func (d *Document) argList(comp []string) ([]any, error) {
	v, found, err := getIn(d.tree, argsPath(comp))
	if err != nil || !found || v == nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, exitcode.Usagef("%s is not a list of {name, value} (fix its shape first)", argsPath(comp))
	}
	return list, nil
}

func argName(entry any) string {
	m, _ := entry.(map[string]any)
	s, _ := m["name"].(string)
	return s
}

func (d *Document) setArg(comp []string, name, value string) error {
	list, err := d.argList(comp)
	if err != nil {
		return err
	}
	var matches []int
	for i, e := range list {
		if argName(e) == name {
			matches = append(matches, i)
		}
	}
	switch len(matches) {
	case 0:
		list = append(list, map[string]any{"name": name, "value": value})
	case 1:
		list[matches[0]].(map[string]any)["value"] = value
	default:
		return exitcode.Usagef("%s has %d entries named %q; set one by index (%s[%d].value) or unset the name first",
			argsPath(comp), len(matches), name, argsPath(comp), matches[0])
	}
	return setIn(d.tree, argsPath(comp), list)
}

func (d *Document) unsetArg(comp []string, name string) error {
	list, err := d.argList(comp)
	if err != nil || list == nil {
		return err
	}
	kept := slices.DeleteFunc(slices.Clone(list), func(e any) bool { return argName(e) == name })
	if len(kept) == len(list) {
		return nil
	}
	if len(kept) == 0 {
		return unsetIn(d.tree, argsPath(comp))
	}
	return setIn(d.tree, argsPath(comp), kept)
}

// schemaIsString reports whether the document's schema types path as a
// string, so a --set value there is taken as text.
func (d *Document) schemaIsString(p Path) bool {
	t := schemaType(d.APIVersion())
	for _, s := range p {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case s.IsList:
			if t.Kind() != reflect.Slice {
				return false
			}
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := fieldByJSONName(t, s.Key)
			if !ok {
				return false
			}
			t = f.Type
		default:
			return false
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.String || t == reflect.TypeFor[metav1.Duration]()
}

func schemaType(apiVersion string) reflect.Type {
	switch apiVersion {
	case V1beta3:
		return reflect.TypeFor[clusterConfigurationV1beta3]()
	case V1:
		return reflect.TypeFor[clusterConfiguration[argV1]]()
	}
	return reflect.TypeFor[clusterConfiguration[argV1beta4]]()
}

// fieldByJSONName finds a struct field by its JSON name, looking through
// inlined embedded structs.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if inner, ok := fieldByJSONName(ft, name); ok {
					return inner, true
				}
			}
			continue
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// getIn reads the value at p. found is false when a key or index is absent.
func getIn(tree map[string]any, p Path) (v any, found bool, err error) {
	var cur any = tree
	for i, s := range p {
		switch c := cur.(type) {
		case map[string]any:
			if s.IsList {
				return nil, false, exitcode.Usagef("%s is a mapping, not a list", p[:i])
			}
			if cur, found = c[s.Key]; !found {
				return nil, false, nil
			}
		case []any:
			if !s.IsList || s.Append {
				return nil, false, exitcode.Usagef("%s is a list; address it with an index such as %s[0]", p[:i], p[:i])
			}
			if s.Index >= len(c) {
				return nil, false, nil
			}
			cur = c[s.Index]
		case nil:
			return nil, false, nil
		default:
			return nil, false, exitcode.Usagef("%s holds a %s, not a mapping or list", p[:i], typeName(c))
		}
	}
	return cur, true, nil
}

// setIn stores value at p, creating missing mappings and lists on the way.
func setIn(tree map[string]any, p Path, value any) error {
	parent, err := containerFor(tree, p)
	if err != nil {
		return err
	}
	last := p[len(p)-1]
	parentPath := p[:len(p)-1]
	switch c := parent.get().(type) {
	case map[string]any:
		if last.IsList {
			return exitcode.Usagef("%s is a mapping, not a list", parentPath)
		}
		c[last.Key] = value
	case []any:
		switch {
		case !last.IsList:
			return exitcode.Usagef("%s is a list; address it with an index such as %s[0]", parentPath, parentPath)
		case last.Append:
			parent.set(append(c, value))
		case last.Index < len(c):
			c[last.Index] = value
		default:
			return exitcode.Usagef("%s: index out of range (the list has %d items; use [+] to append)", p, len(c))
		}
	}
	return nil
}

func unsetIn(tree map[string]any, p Path) error {
	parentPath := p[:len(p)-1]
	var parent any = tree
	if len(parentPath) > 0 {
		v, found, err := getIn(tree, parentPath)
		if err != nil || !found {
			return err
		}
		parent = v
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case map[string]any:
		if last.IsList {
			return exitcode.Usagef("%s is a mapping, not a list", parentPath)
		}
		delete(c, last.Key)
	case []any:
		if !last.IsList || last.Append {
			return exitcode.Usagef("%s is a list; remove an item by index such as %s[0]", parentPath, parentPath)
		}
		if last.Index < len(c) {
			return setIn(tree, parentPath, slices.Delete(slices.Clone(c), last.Index, last.Index+1))
		}
	case nil:
	default:
		return exitcode.Usagef("%s holds a %s, not a mapping or list", parentPath, typeName(c))
	}
	return nil
}

// slot is a place in the tree that holds a container, so that appending to a
// list can store the grown list back.
type slot struct {
	get func() any
	set func(any)
}

// containerFor walks to the container of p's last step, creating mappings
// and lists that do not exist yet.
func containerFor(tree map[string]any, p Path) (slot, error) {
	cur := slot{get: func() any { return tree }, set: func(any) {}}
	for i, s := range p[:len(p)-1] {
		next := p[i+1]
		c := cur.get()
		var child slot
		switch c := c.(type) {
		case map[string]any:
			if s.IsList {
				return slot{}, exitcode.Usagef("%s is a mapping, not a list", p[:i])
			}
			key := s.Key
			child = slot{get: func() any { return c[key] }, set: func(v any) { c[key] = v }}
		case []any:
			if !s.IsList {
				return slot{}, exitcode.Usagef("%s is a list; address it with an index such as %s[0]", p[:i], p[:i])
			}
			idx := s.Index
			if s.Append {
				cur.set(append(c, nil))
				c = cur.get().([]any)
				idx = len(c) - 1
			} else if idx >= len(c) {
				return slot{}, exitcode.Usagef("%s: index out of range (the list has %d items; use [+] to append)", p[:i+1], len(c))
			}
			child = slot{get: func() any { return c[idx] }, set: func(v any) { c[idx] = v }}
		default:
			return slot{}, exitcode.Usagef("%s holds a %s, not a mapping or list", p[:i], typeName(c))
		}
		switch child.get().(type) {
		case nil:
			if next.IsList {
				child.set([]any{})
			} else {
				child.set(map[string]any{})
			}
		case map[string]any, []any:
		default:
			return slot{}, exitcode.Usagef("%s holds a %s, not a mapping or list", p[:i+1], typeName(child.get()))
		}
		cur = child
	}
	switch cur.get().(type) {
	case map[string]any, []any:
		return cur, nil
	}
	return slot{}, exitcode.Usagef("%s holds a %s, not a mapping or list", p[:len(p)-1], typeName(cur.get()))
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// FieldPaths lists the field paths of the v1beta4 schema, for shell
// completion: every mapping key, with [+] on lists, and NAME placeholders
// for component arguments left to the user.
func FieldPaths() []string {
	var out []string
	var walk func(t reflect.Type, prefix string, depth int)
	walk = func(t reflect.Type, prefix string, depth int) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeFor[metav1.Duration]() || depth > 4 {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && tag == "" {
				walk(f.Type, prefix, depth)
				continue
			}
			if tag == "" || tag == "-" || tag == "apiVersion" || tag == "kind" {
				continue
			}
			path := prefix + tag
			ft := f.Type
			switch {
			case tag == "extraArgs":
				out = append(out, path+".")
			case ft.Kind() == reflect.Slice:
				out = append(out, path, path+"[+]")
			case ft.Kind() == reflect.Map:
				out = append(out, path+"[\"")
			default:
				out = append(out, path)
				walk(ft, path+".", depth+1)
			}
		}
	}
	walk(schemaType(V1beta4), "", 0)
	slices.Sort(out)
	return out
}
