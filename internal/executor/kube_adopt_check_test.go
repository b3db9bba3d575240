package executor_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// kubeExpect compares one field of the end state.
func kubeExpect(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v; want %v", what, got, want)
	}
}

// kubeRefTo is the reference the adopted objects must hold: always with
// its namespace, which CAPI's controllers look the object up in.
func kubeRefTo(apiVersion, kind, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: kubeNamespace}
}
