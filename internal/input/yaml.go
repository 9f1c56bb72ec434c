package input

import (
	"bytes"
	"fmt"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// The YAML every part of the plugin reads goes through these, never through
// sigs.k8s.io/yaml directly. yaml.v2, under sigs.k8s.io/yaml, refuses a
// document whose aliases outnumber its nodes, but not one that copies a
// large scalar through a few aliases: a 10 KB scalar aliased 100 times in a
// list, and that list aliased 100 times, is 11 KB of YAML and 100 MB of
// JSON. So anchors and aliases are looked for first, on the parsed node
// tree (yaml.v3, which expands nothing), and refused.

// AliasError is YAML that uses an anchor or an alias.
type AliasError struct {
	// Line is the line of the anchor or alias, counted from the first line
	// of the text checked.
	Line int
	// Name is the anchor's name.
	Name string
	// Alias is true for an alias (*name), false for an anchor (&name).
	Alias bool
}

func (e *AliasError) Error() string {
	what := "anchor &" + e.Name
	if e.Alias {
		what = "alias *" + e.Name
	}
	return fmt.Sprintf("YAML %s on line %d: anchors and aliases are not accepted, as they can make a small file expand beyond any limit; write the value out in full", what, e.Line)
}

// YAMLToJSON is sigs.k8s.io/yaml.YAMLToJSON (of the first document; a key
// given twice keeps its last value) for text of at most MaxBytes without
// anchors or aliases.
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
// without anchors or aliases.
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
// (the one the functions above read) holds an anchor or an alias, without
// expanding any. Text without '&' or '*' cannot hold either and is not
// parsed. Text yaml.v3 cannot parse is refused with its error: what could
// not be checked is never expanded.
func Check(data []byte) error {
	if len(data) > MaxBytes {
		return ErrTooLarge
	}
	if !bytes.ContainsAny(data, "&*") {
		return nil
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return err
	}
	return findAlias(&doc)
}

// findAlias returns the first anchor or alias of the tree, in document
// order: an anchor always comes before its aliases.
func findAlias(n *yamlv3.Node) error {
	switch {
	case n.Kind == yamlv3.AliasNode:
		name := ""
		if n.Alias != nil {
			name = n.Alias.Anchor
		}
		return &AliasError{Line: n.Line, Name: name, Alias: true}
	case n.Anchor != "":
		return &AliasError{Line: n.Line, Name: n.Anchor}
	}
	for _, c := range n.Content {
		if err := findAlias(c); err != nil {
			return err
		}
	}
	return nil
}
