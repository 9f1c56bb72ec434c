// Command localcluster starts or stops the local control plane the demo and
// the benchmark run against: a real etcd and kube-apiserver on loopback, with
// kube-system/kubeadm-config uploaded by the real kubeadm.
//
//	go run ./hack/localcluster up --dir _output/demo
//	go run ./hack/localcluster down --dir _output/demo
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: localcluster up|down --dir DIR")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "_output/demo", "directory for the control plane's data, logs and kubeconfig")
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := run(os.Args[1], abs); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(verb, dir string) error {
	if verb == "down" {
		if err := testcluster.Down(dir); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "local control plane stopped")
		return nil
	}
	if err := testcluster.Down(dir); err != nil { // a previous demo's leftovers
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "  "+format+"\n", args...) }
	c, err := testcluster.Start(ctx, bins, testcluster.Options{Dir: dir, Detach: true, Log: logf})
	if err != nil {
		return err
	}
	logf("seeding kube-system/kubeadm-config with kubeadm init phase upload-config kubeadm")
	if _, err := c.SeedKubeadm(ctx, ""); err != nil {
		_ = testcluster.Down(dir)
		return err
	}
	fmt.Println(c.Kubeconfig)
	return nil
}
