//go:build unix && !linux

package backup

// unmappedRoot: only Linux has user namespaces.
func unmappedRoot(int) bool { return false }
