package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// pause stands in for the pause container's program: with -v it prints its
// version and exits, as kubeadm's health-check Job runs it; otherwise it
// waits for SIGINT or SIGTERM.
func pause(args []string) error {
	if len(args) == 1 && args[0] == "-v" {
		fmt.Println("pause (nodebox, the local control plane's stand-in)")
		return nil
	}
	if len(args) > 0 {
		return errors.New("usage: pause [-v]")
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	<-sigs
	return nil
}
