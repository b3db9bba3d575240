package reconciler

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestLeaderElection: of two replicas on one Lease only one leads; when it
// stops, the other takes over.
func TestLeaderElection(t *testing.T) {
	k := testenv.StartKube(t)
	if err := k.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-system"}}); err != nil {
		t.Fatal(err)
	}
	var leading atomic.Int32
	var maxLeading atomic.Int32
	led := map[string]*atomic.Bool{"a": {}, "b": {}}
	cancels := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, id := range []string{"a", "b"} {
		ctx, cancel := context.WithCancel(logging.With(context.Background(), quiet))
		cancels[id] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = RunAsLeader(ctx, k.Config, LeaderOptions{Namespace: "ferry-system", Name: "ferry", Identity: id,
				LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond},
				func(ctx context.Context) {
					n := leading.Add(1)
					for {
						m := maxLeading.Load()
						if n <= m || maxLeading.CompareAndSwap(m, n) {
							break
						}
					}
					led[id].Store(true)
					<-ctx.Done()
					leading.Add(-1)
				})
		}()
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	}()
	first := waitFor(t, func() string {
		for id, b := range led {
			if b.Load() {
				return id
			}
		}
		return ""
	})
	other := map[string]string{"a": "b", "b": "a"}[first]
	time.Sleep(time.Second)
	if led[other].Load() {
		t.Fatalf("both replicas lead")
	}
	cancels[first]()
	waitFor(t, func() string {
		if led[other].Load() {
			return other
		}
		return ""
	})
	if maxLeading.Load() != 1 {
		t.Errorf("%d replicas led at once", maxLeading.Load())
	}
}

func waitFor(t *testing.T, f func() string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if v := f(); v != "" {
			return v
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("timed out")
	return ""
}
