//go:build tools

// Package tools pins the Traefik command built from this wrapper module; it is never
// compiled into anything. scripts/install-tools.sh runs
// `go build github.com/traefik/traefik/v3/cmd/traefik` inside this directory.
package tools

import (
	_ "github.com/traefik/traefik/v3/cmd/traefik"
)
