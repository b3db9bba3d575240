package openstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/clusterevents"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// lockedBuffer is a log sink written by several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoSecretLeavesTheProcess plants secrets in a plan's identity Secret
// on a real API server: a password in clouds.yaml and another in its
// auth_url's user information. The auth_url points at an identity
// endpoint, a local HTTP server, that answers 400 with the request it was
// sent, password included. The resolve step goes over the embedded bus
// to the executor, which reads the Secret, fails to authenticate, and
// publishes a Failed result; the worker logs the failure through
// logging.Redacting, as the process does. The result's error on the bus
// and the log say that the identity endpoint answered 400, and hold
// neither secret. gophercloud's own error for the same request, which
// quotes both, is then logged through the same handler and written as a
// StepFailed Event on the Cluster: neither the line nor the Event on the
// API server holds them.
func TestNoSecretLeavesTheProcess(t *testing.T) {
	const (
		password = "exec-test-cloud-Pa55w0rd"
		userinfo = "exec-test-url-Pa55"
	)
	planted := []string{password, userinfo, "capo:"}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error": {"code": 400, "message": "malformed request", "request": %s}}`, body)
	}))
	defer echo.Close()
	authURL := strings.Replace(echo.URL, "http://", "http://capo:"+userinfo+"@", 1) + "/v3"
	cloudsYAML := fmt.Sprintf("clouds:\n  openstack:\n    auth:\n      auth_url: %s\n      username: capo\n      password: %s\n"+
		"      project_name: k8s\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n", authURL, password)

	k := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1-cloud-config"},
		Data: map[string][]byte{"clouds.yaml": []byte(cloudsYAML)}}); err != nil {
		t.Fatal(err)
	}
	if err := k.Client.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1"}}); err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	ctx = logging.With(ctx, slog.New(logging.Redacting(slog.NewTextHandler(&logs, nil))))
	bus, err := events.Connect(ctx, events.BusOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	exec := &Executor{Client: k.Client}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = events.RunWorker(wctx, bus.JS, events.WorkerOptions{Kind: exec.Kind(), MaxDeliver: 1}, exec.Execute)
	}()
	results := make(chan events.ResultEvent, 1)
	go func() {
		_ = events.RunResults(wctx, bus.JS, "test", func(_ context.Context, r *events.ResultEvent) error {
			select {
			case results <- *r:
			default:
			}
			return nil
		})
	}()
	in := step.Inputs{
		Cluster:    v1alpha1.ClusterRef{Name: "c1", Namespace: "default"},
		Identity:   &v1alpha1.Identity{SecretName: "c1-cloud-config", CloudName: "openstack"},
		CloudNames: []v1alpha1.CloudName{{Kind: "image", Name: "ubuntu"}},
	}
	target := step.Target{Kind: step.Cloud, Name: "openstack"}
	ev := events.NewStepEvent("c1", "r1", step.Step{Key: step.Key(v1alpha1.PhasePrepare, step.Resolve, target), Phase: v1alpha1.PhasePrepare,
		Executor: step.OpenStack, Action: step.Resolve, Target: target, Inputs: &in}, time.Now())
	if _, err := (&events.Publisher{JS: bus.JS}).PublishStep(ctx, ev); err != nil {
		t.Fatal(err)
	}
	var res events.ResultEvent
	select {
	case res = <-results:
	case <-ctx.Done():
		t.Fatal("no result")
	}

	check := func(what, text, want string) {
		t.Helper()
		for _, s := range planted {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q:\n%s", what, s, text)
			}
		}
		if !strings.Contains(text, want) {
			t.Errorf("%s does not say %q:\n%s", what, want, text)
		}
	}
	t.Logf("result: %s %s", res.Outcome, res.Error)
	if res.Outcome != events.Failed {
		t.Errorf("result %s, want Failed: %+v", res.Outcome, res)
	}
	check("the result's error on the bus", res.Error, "but got 400 instead")
	check("the worker's log", logs.String(), "but got 400 instead")

	// What the same request fails with in gophercloud's hands alone.
	_, raw := gcopenstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: authURL, Username: "capo", Password: password,
		DomainName: "Default", TenantName: "k8s"})
	if raw == nil || !strings.Contains(raw.Error(), password) {
		t.Fatalf("gophercloud's own error does not quote the password, so it shows nothing here: %v", raw)
	}
	logging.From(ctx).Error("authenticate", "error", raw)
	check("the log line of gophercloud's error", logs.String(), "but got 400 instead")

	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	clusterevents.NewRecorder(ctx, cs, k.Client).Record(ctx, "default/c1", []clusterevents.Event{{Type: corev1.EventTypeWarning,
		Reason: clusterevents.ReasonStepFailed, Message: "Step openstack: resolve cloud openstack of phase prepare failed: " + raw.Error()}})
	var written []corev1.Event
	for ctx.Err() == nil && len(written) == 0 {
		var list corev1.EventList
		if err := k.Client.List(ctx, &list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		written = list.Items
		time.Sleep(50 * time.Millisecond)
	}
	if len(written) == 0 {
		t.Fatal("no Event written")
	}
	for _, e := range written {
		t.Logf("Event %s: %s", e.Reason, e.Message)
		check("the Event "+e.Reason, e.Message, "but got 400 instead")
	}
}
