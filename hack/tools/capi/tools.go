//go:build tools

// Package tools records the main packages hack/tools.sh builds from this
// module, so that go mod tidy keeps what they need.
package tools

import (
	_ "sigs.k8s.io/cluster-api"
	_ "sigs.k8s.io/cluster-api-provider-openstack"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
)
