//go:build tools

// Package tools pins the command packages built by e2e/build-controlplane.sh
// so that `go mod tidy` keeps their dependencies in go.mod/go.sum. The file is
// never compiled (build tag "tools").
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
