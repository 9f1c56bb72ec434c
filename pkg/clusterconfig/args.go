package clusterconfig

import (
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Component arguments by name: apiServer.extraArgs.NAME addresses one
// argument on every apiVersion, whether extraArgs is the v1beta3 map or the
// v1beta4/v1 list of {name, value} entries.

// argComponents are the paths whose extraArgs can be addressed by argument
// name on both shapes (the v1beta3 map and the v1beta4/v1 list).
var argComponents = [][]string{{"apiServer"}, {"controllerManager"}, {"scheduler"}, {"etcd", "local"}}

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
