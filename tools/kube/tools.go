//go:build tools

// Package tools pins the commands built from this wrapper module; it is never
// compiled into anything. scripts/install-tools.sh runs
// `go build k8s.io/kubernetes/cmd/<name>` inside this directory.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
