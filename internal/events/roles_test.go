package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRolePermissions: on a real nats-server whose users have
// RolePermissions, an executor started first waits for the streams, which
// only the reconciler creates; each role then does its part of a step's
// round trip (the executor takes the step and publishes its result; the
// reconciler publishes the step and reads and replays the result; the
// executor reports a step no delivery settled) and cannot do the
// other's: the executor's user publishes no step and the reconciler's no
// result, neither lands in its stream; the executor's user creates,
// updates, purges and deletes no stream; neither reads the other's
// answers (InboxPrefix).
func TestRolePermissions(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(logging.With(context.Background(), quiet), 2*time.Minute)
	defer cancel()

	// The executor starts first: it waits, and creates no stream.
	var execLog lockedBuffer
	type connected struct {
		bus *events.Bus
		err error
	}
	execConnected := make(chan connected, 1)
	go func() {
		b, err := events.Connect(logging.With(ctx, slog.New(slog.NewTextHandler(&execLog, nil))), c.RoleOptions(events.RoleExecutor))
		execConnected <- connected{b, err}
	}()
	waiting := "waiting for the reconciler to create stream " + events.StreamSteps
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(execLog.String(), waiting); time.Sleep(50 * time.Millisecond) {
		select {
		case r := <-execConnected:
			t.Fatalf("the executor connected before the reconciler (%v); its log:\n%s", r.err, execLog.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the executor does not say that it waits; its log:\n%s", execLog.String())
		}
	}
	for _, stream := range []string{events.StreamSteps, events.StreamResults} {
		if _, err := c.JetStream.Stream(ctx, stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s, before the reconciler started: %v; want ErrStreamNotFound", stream, err)
		}
	}
	rec := connect(t, ctx, c.RoleOptions(events.RoleReconciler))
	var exec *events.Bus
	select {
	case r := <-execConnected:
		if r.err != nil {
			t.Fatalf("the executor, once the reconciler made the streams: %v; its log:\n%s", r.err, execLog.String())
		}
		exec = r.bus
		t.Cleanup(exec.Close)
	case <-time.After(30 * time.Second):
		t.Fatalf("the executor still waits, after the reconciler made the streams; its log:\n%s", execLog.String())
	}
	if !strings.Contains(execLog.String(), "event streams in place") {
		t.Errorf("the executor's log does not say the streams are in place:\n%s", execLog.String())
	}

	// The round trip, as the roles do it.
	res := collect(t, rec.JS)
	startWorker(t, exec.JS, events.WorkerOptions{Kind: "test"}, func(context.Context, *events.StepEvent) (events.Report, error) {
		return events.Report{Message: "done"}, nil
	})
	go func() { _ = events.WatchMaxDeliveries(ctx, exec.Conn, exec.JS) }()
	ev := stepEvent("p1", "a")
	if _, err := (&events.Publisher{JS: rec.JS}).PublishStep(ctx, ev); err != nil {
		t.Fatalf("the reconciler publishes a step: %v", err)
	}
	succeeded(t, res, []string{ev.Step.Key}, 20*time.Second)
	// A step whose deliveries all die: the executor's user takes the
	// advisory, reads the step, reports it Failed and removes it.
	lost := stepEvent("p1", "lost")
	lost.Step.Executor = "lost"
	cons, err := exec.JS.CreateOrUpdateConsumer(ctx, events.StreamSteps, jetstream.ConsumerConfig{
		Durable: events.ConsumerName("lost"), FilterSubject: events.StepsPrefix + "lost.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 200 * time.Millisecond, MaxDeliver: 2,
	})
	if err != nil {
		t.Fatalf("the executor makes its consumer: %v", err)
	}
	if _, err := (&events.Publisher{JS: rec.JS}).PublishStep(ctx, lost); err != nil {
		t.Fatalf("the reconciler publishes a step: %v", err)
	}
	for range 3 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range batch.Messages() {
		}
	}
	res.wait(t, "the lost step's failure", func(all []events.ResultEvent) bool {
		return len(all) == 2 && all[1].StepID == lost.ID && all[1].Outcome == events.Failed
	})
	waitEmpty(t, c.JetStream)
	// The reconciler replays the results, as it does when it starts.
	replayed, err := events.ReplayResults(ctx, rec.JS, time.Now().Add(-time.Minute), func(context.Context, *events.ResultEvent) error { return nil })
	if err != nil || replayed != 2 {
		t.Errorf("the reconciler replayed %d results, %v; want 2", replayed, err)
	}

	// Each role's forgery, refused: the server drops the request, and
	// JetStream never answers it (an answer, even an error, would say the
	// request got through).
	refused := func(what string, request func(context.Context) error) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		var api *jetstream.APIError
		switch err := request(rctx); {
		case err == nil:
			t.Error(what)
		case errors.As(err, &api):
			t.Errorf("%s: JetStream answered %v; want the request refused, unanswered", what, err)
		}
	}
	forged := func(who string, b *events.Bus, subject string, payload any) {
		t.Helper()
		data, _ := json.Marshal(payload)
		refused(fmt.Sprintf("the %s's user published on %s", who, subject), func(ctx context.Context) error {
			_, err := b.JS.Publish(ctx, subject, data)
			return err
		})
		if err := b.Conn.Publish(subject, data); err == nil {
			_ = b.Conn.Flush()
		}
	}
	forged("executor", exec, events.StepSubject("kube", "p1"), stepEvent("p1", "forged"))
	forged("reconciler", rec, events.ResultSubject("p1"), &events.ResultEvent{Type: events.TypeResult, Plan: "p1", StepKey: ev.Step.Key, Outcome: events.Failed})
	// Nor may the executor's user change a stream: a stolen password
	// neither shortens what the results keep nor drops the steps.
	configs := map[string]jetstream.StreamConfig{}
	for _, stream := range []string{events.StreamSteps, events.StreamResults} {
		s, err := c.JetStream.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		configs[stream] = s.CachedInfo().Config
	}
	refused("the executor's user created a stream", func(ctx context.Context) error {
		_, err := exec.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "PEEK", Subjects: []string{"peek.>"}})
		return err
	})
	shorter := configs[events.StreamResults]
	shorter.MaxAge = time.Hour
	refused("the executor's user updated "+events.StreamResults, func(ctx context.Context) error {
		_, err := exec.JS.UpdateStream(ctx, shorter)
		return err
	})
	refused("the executor's user created or updated "+events.StreamResults, func(ctx context.Context) error {
		_, err := exec.JS.CreateOrUpdateStream(ctx, shorter)
		return err
	})
	refused("the executor's user purged "+events.StreamResults, func(ctx context.Context) error {
		s, err := exec.JS.Stream(ctx, events.StreamResults)
		if err != nil {
			t.Errorf("the executor's user may not read %s: %v", events.StreamResults, err)
			return nil
		}
		return s.Purge(ctx)
	})
	refused("the executor's user deleted "+events.StreamSteps, func(ctx context.Context) error {
		return exec.JS.DeleteStream(ctx, events.StreamSteps)
	})
	if _, err := c.JetStream.Stream(ctx, "PEEK"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream PEEK: %v; want ErrStreamNotFound", err)
	}
	for stream, want := range map[string]uint64{events.StreamSteps: 0, events.StreamResults: 2} {
		s, err := c.JetStream.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if got := info.State.Msgs; got != want {
			t.Errorf("%s holds %d messages; want %d (none forged, none purged)", stream, got, want)
		}
		if !reflect.DeepEqual(info.Config, configs[stream]) {
			t.Errorf("%s's configuration changed:\n%+v\nwas\n%+v", stream, info.Config, configs[stream])
		}
	}
	// Nor may the executor's user make a consumer of the results, or the
	// reconciler's one of the steps: each reads only what its role reads.
	consumer := func(who string, b *events.Bus, stream string, cfg jetstream.ConsumerConfig) {
		t.Helper()
		refused(fmt.Sprintf("the %s's user made a consumer of %s", who, stream), func(ctx context.Context) error {
			_, err := b.JS.CreateOrUpdateConsumer(ctx, stream, cfg)
			return err
		})
	}
	consumer("executor", exec, events.StreamResults, jetstream.ConsumerConfig{Durable: "peek"})
	consumer("reconciler", rec, events.StreamSteps, jetstream.ConsumerConfig{Durable: "steal", FilterSubject: events.StepsPrefix + "kube.>"})

	// Nor may either read the other's answers: a subscription to the
	// other's inboxes, or to all inboxes, gets nothing, while the test's
	// own user sees the answer go by.
	buses := map[events.Role]*events.Bus{events.RoleReconciler: rec, events.RoleExecutor: exec}
	for reader, victim := range map[events.Role]events.Role{events.RoleExecutor: events.RoleReconciler, events.RoleReconciler: events.RoleExecutor} {
		seen, err := c.Conn.SubscribeSync(events.InboxPrefix(victim) + ".>")
		if err != nil {
			t.Fatal(err)
		}
		var spies []*nats.Subscription
		for _, subject := range []string{events.InboxPrefix(victim) + ".>", "_INBOX.>"} {
			if spy, err := buses[reader].Conn.SubscribeSync(subject); err == nil {
				spies = append(spies, spy)
			}
		}
		_ = buses[reader].Conn.Flush()
		if err := c.Conn.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := buses[victim].JS.Stream(ctx, events.StreamSteps); err != nil {
			t.Fatalf("the %s reads stream %s: %v", victim, events.StreamSteps, err)
		}
		if _, err := seen.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("no answer to the %s under %s: %v", victim, events.InboxPrefix(victim), err)
		}
		for _, spy := range spies {
			if msg, err := spy.NextMsg(500 * time.Millisecond); err == nil {
				t.Errorf("the %s's user read an answer to the %s on %s (subscribed to %s)", reader, victim, msg.Subject, spy.Subject)
			}
			_ = spy.Unsubscribe()
		}
		_ = seen.Unsubscribe()
	}
}

// lockedBuffer is a bytes.Buffer that a logger writes to while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRolePermissionsDocumented: docs/install.md's NATS Helm values give
// each role's user exactly the subjects RolePermissions allows it, so that
// a cluster set up from the page lets ferry work, and lets a stolen
// password do no more than the tests show.
func TestRolePermissionsDocumented(t *testing.T) {
	page, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(page), "`nats-values.yaml`:\n\n```yaml\n")
	if !ok {
		t.Fatal("docs/install.md has no nats-values.yaml")
	}
	block, _, _ = strings.Cut(block, "```")
	var values struct {
		Config struct {
			Merge struct {
				Accounts map[string]struct {
					Users []struct {
						User        string `json:"user"`
						Permissions struct {
							Publish   struct{ Allow []string } `json:"publish"`
							Subscribe struct{ Allow []string } `json:"subscribe"`
						} `json:"permissions"`
					} `json:"users"`
				} `json:"accounts"`
			} `json:"merge"`
		} `json:"config"`
	}
	if err := yaml.Unmarshal([]byte(block), &values); err != nil {
		t.Fatalf("docs/install.md's nats-values.yaml: %v", err)
	}
	documented := map[string]events.Permissions{}
	for _, account := range values.Config.Merge.Accounts {
		for _, u := range account.Users {
			documented[u.User] = events.Permissions{Publish: u.Permissions.Publish.Allow, Subscribe: u.Permissions.Subscribe.Allow}
		}
	}
	for _, role := range events.Roles {
		user := "ferry-" + string(role)
		got, ok := documented[user]
		if !ok {
			t.Errorf("docs/install.md has no user %s", user)
			continue
		}
		want := events.RolePermissions(role)
		for _, list := range []struct {
			name      string
			got, want []string
		}{{"publish", got.Publish, want.Publish}, {"subscribe", got.Subscribe, want.Subscribe}} {
			if !slices.Equal(slices.Sorted(slices.Values(list.got)), slices.Sorted(slices.Values(list.want))) {
				t.Errorf("docs/install.md: user %s may %s\n%q\nwant (events.RolePermissions)\n%q", user, list.name, list.got, list.want)
			}
		}
	}
}
