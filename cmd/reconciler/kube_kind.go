package main

import (
	"log/slog"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/executor"
)

// kubeExecutor builds the executor of the management cluster, kind "kube".
func kubeExecutor(kind string, c client.Client, log *slog.Logger) (executor.Executor, bool) {
	return nil, false
}
