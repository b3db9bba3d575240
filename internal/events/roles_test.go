package events_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRolePermissions: on a real nats-server whose users have
// RolePermissions, each role does its part of a step's round trip (the
// executor ensures the streams, takes the step, publishes its result; the
// reconciler publishes the step and reads and replays the result; the
// executor reports a step no delivery settled) and cannot do the
// other's: the executor's user publishes no step and the reconciler's no
// result; neither lands in its stream.
func TestRolePermissions(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(logging.With(context.Background(), quiet), time.Minute)
	defer cancel()
	exec := connect(t, ctx, c.RoleOptions(events.RoleExecutor))
	rec := connect(t, ctx, c.RoleOptions(events.RoleReconciler))

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

	// Each role's forgery, refused.
	forged := func(who string, b *events.Bus, subject string, payload any) {
		t.Helper()
		data, _ := json.Marshal(payload)
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		if _, err := b.JS.Publish(pctx, subject, data); err == nil {
			t.Errorf("the %s's user published on %s", who, subject)
		}
		if err := b.Conn.Publish(subject, data); err == nil {
			_ = b.Conn.Flush()
		}
	}
	forged("executor", exec, events.StepSubject("kube", "p1"), stepEvent("p1", "forged"))
	forged("reconciler", rec, events.ResultSubject("p1"), &events.ResultEvent{Type: events.TypeResult, Plan: "p1", StepKey: ev.Step.Key, Outcome: events.Failed})
	for stream, want := range map[string]uint64{events.StreamSteps: 0, events.StreamResults: 2} {
		s, err := c.JetStream.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().State.Msgs; got != want {
			t.Errorf("%s holds %d messages; want %d (none forged)", stream, got, want)
		}
	}
	// Nor may the executor's user make a consumer of the results, or the
	// reconciler's one of the steps: each reads only what its role reads.
	consumer := func(who string, b *events.Bus, stream string, cfg jetstream.ConsumerConfig) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		if _, err := b.JS.CreateOrUpdateConsumer(cctx, stream, cfg); err == nil {
			t.Errorf("the %s's user made a consumer of %s", who, stream)
		}
	}
	consumer("executor", exec, events.StreamResults, jetstream.ConsumerConfig{Durable: "peek"})
	consumer("reconciler", rec, events.StreamSteps, jetstream.ConsumerConfig{Durable: "steal", FilterSubject: events.StepsPrefix + "kube.>"})
}

// TestRolePermissionsDocumented: docs/install.md's NATS Helm values give
// each role's user every subject RolePermissions allows it, so that a
// cluster set up from the page lets ferry work.
func TestRolePermissionsDocumented(t *testing.T) {
	page, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(page)
	for _, role := range events.Roles {
		user := "- user: ferry-" + string(role) + "\n"
		i := strings.Index(doc, user)
		if i < 0 {
			t.Errorf("docs/install.md has no user ferry-%s", role)
			continue
		}
		section := doc[i+len(user):]
		if j := strings.Index(section, "- user: "); j >= 0 {
			section = section[:j]
		}
		if j := strings.Index(section, "```"); j >= 0 {
			section = section[:j]
		}
		p := events.RolePermissions(role)
		for _, subject := range slices.Concat(p.Publish, p.Subscribe) {
			if !strings.Contains(section, `"`+subject+`"`) {
				t.Errorf("docs/install.md: user ferry-%s is not allowed %q", role, subject)
			}
		}
	}
}
