package clusterconfig

import (
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the schema structs in types.go tell the editor: which fields hold
// strings, and which paths exist (for completion).

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
