//go:build tools

// Package tools pins the commands built from this wrapper module; it is never
// compiled into anything. scripts/install-tools.sh runs
// `go build k8s.io/kubernetes/cmd/<name>` inside this directory: the control plane for the
// controller tests (kube-apiserver), kubectl, and the rest of a one-node cluster for the e2e
// tests (kube-controller-manager, kube-scheduler, kubelet, kube-proxy).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
