package backup

import (
	"os"
	"strconv"
	"strings"
)

// unmappedRoot reports whether uid is how root's files show in this
// process's user namespace: the overflow uid, in a namespace that does not
// map uid 0 of its parent. (Other users that are not mapped show as it too;
// such a namespace cannot tell them from root.)
func unmappedRoot(uid int) bool {
	overflow, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if err != nil || strings.TrimSpace(string(overflow)) != strconv.Itoa(uid) {
		return false
	}
	idMap, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(idMap)), "\n") {
		// inside outside count: root of the parent is mapped when a range
		// starts at outside uid 0.
		if f := strings.Fields(line); len(f) == 3 && f[1] == "0" {
			return false
		}
	}
	return true
}
