package clusterconfig

import (
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig/internal/componentconfig"
)

// Component configs (KubeletConfiguration, KubeProxyConfiguration) in a
// kubeadm config file: kubeadm decodes them strictly against the component's
// own schema, and checks nothing else before it starts the component. The
// plugin decodes them into generated mirrors of the components' types
// (internal/componentconfig), which decode as the originals do without
// linking the components' packages.

// newKubeletFields are KubeletConfiguration fields newer than some kubeadm
// releases the plugin knows: an older kubeadm's schema refuses them as
// unknown. The plugin's schema is the newest release's.
var newKubeletFields = map[string]int{"defaultPodSysctls": 37}

// validateComponentConfig decodes a component config strictly.
func validateComponentConfig(js []byte, kind string, rel *release, r *Report) {
	switch kind {
	case KindKubelet:
		if decodeComponentConfig[componentconfig.KubeletConfiguration](js, r) {
			tree, _ := decodeTree(js, false)
			for name, minor := range newKubeletFields {
				if _, ok := tree[name]; ok && rel.minor < minor {
					r.errorf("unknown field %q (KubeletConfiguration has it from kubeadm 1.%d on, not in kubeadm %s)", name, minor, rel)
				}
			}
		}
	case KindProxy:
		decodeComponentConfig[componentconfig.KubeProxyConfiguration](js, r)
	default:
		r.errorf("unknown component config kind %s", kind)
	}
}

// decodeComponentConfig decodes js strictly into a T, adding what it refuses
// to r; it reports whether js decoded (unknown and duplicate fields aside).
func decodeComponentConfig[T any](js []byte, r *Report) bool {
	if _, err := strictInto[T](js, r); err != nil {
		r.errorf("%s", decodeError(err))
		return false
	}
	return true
}
