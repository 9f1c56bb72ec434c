//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package controlplane

import "errors"

// Lock is unsupported where there is no flock: control-plane nodes run Linux.
func Lock(string) (func(), error) {
	return nil, errors.New("reconfigure runs on a Linux control-plane node")
}
