//go:build openstack

package executor_test

import (
	corev1 "k8s.io/api/core/v1"
)

// The seed 000 cluster the adoption runs on, as cmd/reconciler's plan test
// has it.
const (
	cluster   = "capi-quickstart"
	namespace = "default"
	version   = "v1.31.4"
)

// refTo is the reference the adopted objects must hold: always with
// its namespace, which CAPI's controllers look the object up in.
func refTo(apiVersion, kind, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: namespace}
}
