// The pod sandbox ("pause") image of the local cluster (scripts/cluster.sh): it only holds the
// pod's namespaces and waits for SIGINT/SIGTERM. Built from this file, so no registry is needed.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
