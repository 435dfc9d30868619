//go:build tools

// Package tools pins sigs.k8s.io/kwok, the Kubernetes SIG project that simulates kubelets (node
// heartbeats, pods Running, graceful deletion completed), built by e2e/build-controlplane.sh. The
// file is never compiled (build tag "tools").
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
