//go:build tools

// Package tools pins helm.sh/helm/v3/cmd/helm so that `go mod tidy` keeps
// its dependencies. Never compiled (build tag "tools").
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
