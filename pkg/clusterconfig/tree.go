package clusterconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The generic JSON tree a Document holds, read and written by Path.

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

// cloneValue deep-copies a JSON value, so a value an Edit keeps is never
// shared with a tree it was stored in.
func cloneValue(v any) any {
	switch c := v.(type) {
	case map[string]any:
		out := maps.Clone(c)
		for k, e := range out {
			out[k] = cloneValue(e)
		}
		return out
	case []any:
		out := slices.Clone(c)
		for i, e := range out {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}
