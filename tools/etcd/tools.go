//go:build tools

// Package tools pins the etcd server command built from this wrapper module; it
// is never compiled into anything. scripts/install-tools.sh runs
// `go build go.etcd.io/etcd/server/v3` inside this directory.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
