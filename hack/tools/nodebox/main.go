// Command nodebox is what a local control-plane node's root holds besides
// kubeadm's files, for `kubeadm --rootfs NODE_ROOT upgrade ...` to run there
// as it runs on a real node (internal/testcluster/noderoot.go). It is one
// static binary that acts by the name it is run as, as busybox does:
//
//	nodebox cri --socket PATH   a container runtime's CRI endpoint, with no
//	                            containers: what kubeadm's preflight and
//	                            image pull ask of the runtime (cri.go)
//	cp -r SRC DST               the `cp` kubeadm runs to back up etcd's data
//	                            directory (cp.go): inside a chroot the
//	                            host's dynamically linked cp cannot run
//	pause [-v]                  the pause container's program, which the
//	                            harness's kubelet runs for the Pods it can
//	                            run (kubeadm's health-check Job runs `pause
//	                            -v`)
//
// It is pinned with the control plane in hack/tools, apart from the
// plugin's go.mod: the CRI API it serves is the one the pinned kubeadm
// speaks.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "nodebox" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	var err error
	switch name {
	case "cri":
		err = serveCRI(args)
	case "cp":
		err = cp(args)
	case "pause":
		err = pause(args)
	default:
		err = errors.New("usage: nodebox cri --socket PATH | cp -r SRC DST | pause [-v] (or run as cp or pause)")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
