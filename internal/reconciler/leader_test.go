package reconciler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestLeaderElection: of two replicas on one Lease only one leads; when it
// stops, the other takes over. The leader's other record in the management
// cluster, the history ConfigMap, is checked on the same API server
// (testConfigMapHistory).
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
	t.Run("history", func(t *testing.T) { testConfigMapHistory(t, k) })
}

// testConfigMapHistory: the mark is none before the first Save, is read
// back as saved, keeps an acknowledgement a person wrote by hand until the
// next Save, and a namespace that does not exist says so.
func testConfigMapHistory(t *testing.T, k *testenv.Kube) {
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(k.Config)
	h := ConfigMapHistory{Client: cs, Namespace: "ferry-system", Name: "ferry-history"}
	if m, err := h.Load(ctx); err != nil || !reflect.DeepEqual(m, HistoryMark{}) {
		t.Fatalf("before any save: %+v, %v; want the zero mark", m, err)
	}
	for _, rev := range []string{"aaaa", "bbbb"} {
		if err := h.Save(ctx, HistoryMark{ActedOn: rev}); err != nil {
			t.Fatal(err)
		}
		if m, err := h.Load(ctx); err != nil || m.ActedOn != rev {
			t.Fatalf("after saving %s: %+v, %v", rev, m, err)
		}
	}
	cm, err := cs.CoreV1().ConfigMaps("ferry-system").Get(ctx, "ferry-history", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[HistoryAcknowledgedKey] = "cccc"
	if _, err := cs.CoreV1().ConfigMaps("ferry-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if m, err := h.Load(ctx); err != nil || !reflect.DeepEqual(m, HistoryMark{ActedOn: "bbbb", Acknowledged: "cccc"}) {
		t.Errorf("after an acknowledgement by hand: %+v, %v", m, err)
	}
	kept := HistoryMark{ActedOn: "dddd", Keypairs: map[string][]string{"prod-eu1": {"capi-key", "extra-key"}, "prod-us1": {"us-key"}}}
	if err := h.Save(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if m, err := h.Load(ctx); err != nil || !reflect.DeepEqual(m, kept) {
		t.Errorf("keypairs read back: %+v, %v; want %+v", m, err, kept)
	}
	missing := ConfigMapHistory{Client: cs, Namespace: "no-such-namespace", Name: "ferry-history"}
	if err := missing.Save(ctx, HistoryMark{ActedOn: "aaaa"}); !errors.Is(err, ErrNoHistoryNamespace) {
		t.Errorf("save into a missing namespace: %v; want ErrNoHistoryNamespace", err)
	}
	if _, err := missing.Load(ctx); !errors.Is(err, ErrNoHistoryNamespace) {
		t.Errorf("load from a missing namespace: %v; want ErrNoHistoryNamespace", err)
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
