//go:build tools

// Package tools pins go.etcd.io/etcd/server/v3 (a main package) so that
// `go mod tidy` keeps its dependencies. Never compiled (build tag "tools").
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
