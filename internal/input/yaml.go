package input

import (
	"bytes"
	"fmt"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// The YAML every part of the plugin reads goes through these, never through
// sigs.k8s.io/yaml directly. Anchors and aliases are read as kubeadm reads
// them (sigs.k8s.io/yaml, over yaml.v2: an alias is a copy of its anchor's
// value, "<<" merges a mapping), but only once what they expand to is
// known to be bounded. yaml.v2 refuses a document whose aliases outnumber
// its nodes, but not one that copies a large scalar through a few aliases:
// a 10 KB scalar aliased 100 times in a list, and that list aliased 100
// times, is 11 KB of YAML and 100 MB of JSON. So the text is first parsed
// into a node tree (yaml.v3, which expands nothing), the size of every
// alias's expansion is counted on it, and a document that would expand past
// the bound is refused before anything is converted.

// The bound on what a document may expand to: expansionFactor times the
// nodes and the bytes of values its text holds, plus extraNodes and
// extraBytes. Anchors in a kubeadm file share a block between a few places
// (the same extraArgs, certSANs, volumes or taints for several components
// or nodes), so the expansion is the block times the places it is used in,
// a few times the text at most. The constants alone admit anything that
// expanded would still fit in a ConfigMap (1 MiB) with up to 10000 values,
// whatever the text's size, so a small file that shares a block many times
// is read too. A refused document costs its parse and a count in
// proportion to its text, nothing more; an accepted one expands to at most
// 4 times its text plus the constants, which MaxBytes bounds in turn.
const (
	expansionFactor = 4
	extraNodes      = 10000
	extraBytes      = 1 << 20
)

// ExpansionError is YAML whose aliases expand it past the bound: to more
// than 4 times the nodes or the bytes of values its text holds, plus 10000
// nodes or 1 MiB, or without end (an alias inside the value it names).
type ExpansionError struct {
	// Line is the line of the alias at which the expansion passed the
	// bound, counted from the first line of the text checked.
	Line int
	// Name is the alias's anchor.
	Name string
	// Endless is true for an alias inside the value it names.
	Endless bool
	// Unit is "nodes" or "bytes", what passed the bound; Limit is the bound
	// and Own what the text holds, in that unit.
	Unit       string
	Limit, Own int64
}

func (e *ExpansionError) Error() string {
	if e.Endless {
		return fmt.Sprintf("YAML alias *%s on line %d is inside the value it names, so its expansion never ends; write the value out in full", e.Name, e.Line)
	}
	what, extra := "nodes", "10000"
	if e.Unit == "bytes" {
		what, extra = "bytes of values", "1 MiB"
	}
	return fmt.Sprintf("YAML alias *%s on line %d expands the document to more than %d %s, the limit for one that holds %d (%d times as many, plus %s); use fewer aliases, or write the values out in full",
		e.Name, e.Line, e.Limit, what, e.Own, expansionFactor, extra)
}

// YAMLToJSON is sigs.k8s.io/yaml.YAMLToJSON (of the first document; a key
// given twice keeps its last value; aliases expanded) for text of at most
// MaxBytes whose aliases stay within the bound.
func YAMLToJSON(data []byte) ([]byte, error) {
	if err := Check(data); err != nil {
		return nil, err
	}
	return yaml.YAMLToJSON(data)
}

// YAMLToJSONStrict is YAMLToJSON refusing a key given twice.
func YAMLToJSONStrict(data []byte) ([]byte, error) {
	if err := Check(data); err != nil {
		return nil, err
	}
	return yaml.YAMLToJSONStrict(data)
}

// Unmarshal is sigs.k8s.io/yaml.Unmarshal for text of at most MaxBytes
// whose aliases stay within the bound.
func Unmarshal(data []byte, v any) error {
	if err := Check(data); err != nil {
		return err
	}
	return yaml.Unmarshal(data, v)
}

// UnmarshalStrict is Unmarshal refusing unknown fields and keys given twice.
func UnmarshalStrict(data []byte, v any) error {
	if err := Check(data); err != nil {
		return err
	}
	return yaml.UnmarshalStrict(data, v)
}

// Check refuses text of more than MaxBytes, and YAML whose first document
// (the one the functions above read) its aliases would expand past the
// bound, without expanding any. Text without '*' holds no alias, expands to
// itself, and is not parsed. Text yaml.v3 cannot parse is refused with its
// error: what could not be measured is never expanded.
func Check(data []byte) error {
	if len(data) > MaxBytes {
		return ErrTooLarge
	}
	if !bytes.ContainsRune(data, '*') {
		return nil
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return err
	}
	own := ownSize(&doc)
	x := &expansion{
		limit: size{nodes: expansionFactor*own.nodes + extraNodes, bytes: expansionFactor*own.bytes + extraBytes},
		own:   own,
		memo:  map[*yamlv3.Node]size{},
		open:  map[*yamlv3.Node]bool{},
	}
	var total size
	return x.walk(&doc, &total)
}

// size is what a node stands for: how many nodes, and how many bytes of
// scalar values (keys included).
type size struct{ nodes, bytes int64 }

// ownSize is the size of the tree as written: an alias is one node of no
// bytes.
func ownSize(n *yamlv3.Node) size {
	s := size{nodes: 1}
	if n.Kind == yamlv3.ScalarNode {
		s.bytes = int64(len(n.Value))
	}
	for _, c := range n.Content {
		cs := ownSize(c)
		s.nodes += cs.nodes
		s.bytes += cs.bytes
	}
	return s
}

// expansion counts what nodes expand to, each anchored value once
// (memo), so that counting takes time in proportion to the text however
// far it expands. Sizes are capped just past the limit, so no sum
// overflows.
type expansion struct {
	limit, own size
	memo       map[*yamlv3.Node]size
	open       map[*yamlv3.Node]bool // values being counted: an alias to one is endless
}

// add adds b to a, capped just past the limit.
func (x *expansion) add(a, b size) size {
	return size{nodes: min(a.nodes+b.nodes, x.limit.nodes+1), bytes: min(a.bytes+b.bytes, x.limit.bytes+1)}
}

// walk goes through the document in order, adding what each node expands
// to into total, and names the alias at which total passes the limit. The
// text's own nodes and bytes are within the limit, so it is always an
// alias that passes it.
func (x *expansion) walk(n *yamlv3.Node, total *size) error {
	if n.Kind == yamlv3.AliasNode {
		s, err := x.of(n)
		if err != nil {
			return err
		}
		*total = x.add(*total, s)
		switch {
		case total.nodes > x.limit.nodes:
			return &ExpansionError{Line: n.Line, Name: n.Value, Unit: "nodes", Limit: x.limit.nodes, Own: x.own.nodes}
		case total.bytes > x.limit.bytes:
			return &ExpansionError{Line: n.Line, Name: n.Value, Unit: "bytes", Limit: x.limit.bytes, Own: x.own.bytes}
		}
		return nil
	}
	own := size{nodes: 1}
	if n.Kind == yamlv3.ScalarNode {
		own.bytes = int64(len(n.Value))
	}
	*total = x.add(*total, own)
	for _, c := range n.Content {
		if err := x.walk(c, total); err != nil {
			return err
		}
	}
	return nil
}

// of is what n expands to: an alias its anchor's value, recursively.
func (x *expansion) of(n *yamlv3.Node) (size, error) {
	if n.Kind == yamlv3.AliasNode {
		switch {
		case n.Alias == nil: // yaml.v3 refuses an unknown anchor before
			return size{nodes: 1}, nil
		case x.open[n.Alias]:
			return size{}, &ExpansionError{Line: n.Line, Name: n.Value, Endless: true}
		}
		return x.of(n.Alias)
	}
	if n.Kind == yamlv3.ScalarNode {
		return size{nodes: 1, bytes: int64(len(n.Value))}, nil
	}
	if s, ok := x.memo[n]; ok {
		return s, nil
	}
	x.open[n] = true
	s := size{nodes: 1}
	for _, c := range n.Content {
		cs, err := x.of(c)
		if err != nil {
			return size{}, err
		}
		s = x.add(s, cs)
	}
	delete(x.open, n)
	x.memo[n] = s
	return s, nil
}
