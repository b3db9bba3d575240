package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/internal/logging"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderOptions configure leader election on a Lease.
type LeaderOptions struct {
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity of this replica (pod name); must be unique.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go;
	// defaults 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunAsLeader runs lead while this replica holds the Lease, so that only one
// reconciler acts at a time. lead's context ends when leadership is lost
// (the replica must then stop acting: it returns, and the process should
// exit so it restarts as a follower) or when ctx ends. RunAsLeader returns
// when ctx ends or after leadership was lost.
func RunAsLeader(ctx context.Context, cfg *rest.Config, opts LeaderOptions, lead func(context.Context)) error {
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.LeaseDuration,
		RenewDeadline:   opts.RenewDeadline,
		RetryPeriod:     opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            opts.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logging.From(ctx).Info("leading", "lease", opts.Namespace+"/"+opts.Name, "identity", opts.Identity)
				lead(ctx)
			},
			OnStoppedLeading: func() {
				logging.From(ctx).Info("not leading", "lease", opts.Namespace+"/"+opts.Name, "identity", opts.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	return nil
}
