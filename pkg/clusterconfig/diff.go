package clusterconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"slices"
)

// Hash names a stored document: "sha256:" and the hex sha256 of its bytes,
// exactly as stored (not of its parsed tree: two layouts of one document
// are two documents to a reader that pins bytes). The rollout record names
// its documents with it, and the engine stamps kubeadm-config with it, so
// that both name a document the same way.
func Hash(doc []byte) string {
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Diff lists the fields whose values differ between a and b, sorted, as
// paths in the plugin's syntax (those of get and patch --set): a field set
// on one side only, or to another value. Mappings are compared key by key;
// a component's extraArgs list of {name, value} entries (v1beta4, v1) is
// compared argument by argument, as apiServer.extraArgs.NAME; any other
// list is one value. It tells a person what going from one document to the
// other would change.
func Diff(a, b *Document) []string {
	var out []string
	diffValues(a.tree, b.tree, nil, &out)
	slices.Sort(out)
	return out
}

func diffValues(a, b any, p Path, out *[]string) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	switch {
	case aIsMap && bIsMap:
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			av, aok := am[k]
			bv, bok := bm[k]
			q := append(slices.Clip(p), Step{Key: k})
			if aok != bok {
				*out = append(*out, q.String())
				continue
			}
			diffValues(av, bv, q, out)
		}
	case isArgList(p, a) && isArgList(p, b):
		diffArgs(a.([]any), b.([]any), p, out)
	case !reflect.DeepEqual(a, b):
		*out = append(*out, p.String())
	}
}

// isArgList reports whether v, at p, is a component's extraArgs list whose
// entries are named once each, so that they can be compared by name.
func isArgList(p Path, v any) bool {
	list, ok := v.([]any)
	if !ok || len(p) == 0 || p[len(p)-1].Key != "extraArgs" {
		return false
	}
	names := make([]string, 0, len(list))
	for _, e := range list {
		n := argName(e)
		if n == "" || slices.Contains(names, n) {
			return false
		}
		names = append(names, n)
	}
	prefix := make([]string, 0, len(p)-1)
	for _, s := range p[:len(p)-1] {
		if s.IsList {
			return false
		}
		prefix = append(prefix, s.Key)
	}
	return slices.ContainsFunc(argComponents, func(c []string) bool { return slices.Equal(c, prefix) })
}

func diffArgs(a, b []any, p Path, out *[]string) {
	byName := func(list []any) map[string]any {
		m := make(map[string]any, len(list))
		for _, e := range list {
			m[argName(e)] = e
		}
		return m
	}
	am, bm := byName(a), byName(b)
	names := make([]string, 0, len(am)+len(bm))
	for n := range am {
		names = append(names, n)
	}
	for n := range bm {
		if _, ok := am[n]; !ok {
			names = append(names, n)
		}
	}
	for _, n := range names {
		if !reflect.DeepEqual(am[n], bm[n]) {
			*out = append(*out, append(slices.Clip(p), Step{Key: n}).String())
		}
	}
}
