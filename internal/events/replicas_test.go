package events_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// waitReplicas waits until stream, and the named consumers of it, have
// replicas copies, each of the others caught up with the leader, and
// returns the stream's information.
func waitReplicas(t *testing.T, js jetstream.JetStream, stream string, replicas int, consumers ...string) *jetstream.StreamInfo {
	t.Helper()
	var info *jetstream.StreamInfo
	poll(t, fmt.Sprintf("%s does not have %d caught-up replicas", stream, replicas), func(ctx context.Context) (bool, string, error) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false, "", err
		}
		info = s.CachedInfo() // js.Stream asked for it just now
		if info.Config.Replicas != replicas || !caughtUp(info.Cluster, replicas) {
			return false, fmt.Sprintf("stream %s: config %d replicas, cluster %s", stream, info.Config.Replicas, peers(info.Cluster)), nil
		}
		for _, name := range consumers {
			c, err := s.Consumer(ctx, name)
			if err != nil {
				return false, "", err
			}
			if ci := c.CachedInfo(); !caughtUp(ci.Cluster, replicas) {
				return false, fmt.Sprintf("consumer %s: config %d replicas, cluster %s", name, ci.Config.Replicas, peers(ci.Cluster)), nil
			}
		}
		return true, "", nil
	})
	return info
}

// poll asks round again every 100 ms until it is done, and fails the test
// with failure and the last state or error after a minute. Each round is
// bounded by events.APIAttempt: a JetStream request sent while a leader
// is being elected is lost, not answered late.
func poll(t *testing.T, failure string, round func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last string
	for {
		actx, acancel := context.WithTimeout(ctx, events.APIAttempt)
		done, state, err := round(actx)
		acancel()
		switch {
		case done:
			return
		case err != nil:
			last = err.Error()
		default:
			last = state
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %s", failure, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// caughtUp reports a leader and replicas-1 other peers, all current.
func caughtUp(c *jetstream.ClusterInfo, replicas int) bool {
	if c == nil || c.Leader == "" || len(c.Replicas) != replicas-1 {
		return false
	}
	for _, p := range c.Replicas {
		if !p.Current || p.Offline {
			return false
		}
	}
	return true
}

func peers(c *jetstream.ClusterInfo) string {
	if c == nil {
		return "none"
	}
	s := "leader " + c.Leader
	for _, p := range c.Replicas {
		s += fmt.Sprintf(", %s (current %v)", p.Name, p.Current)
	}
	return s
}

// effects records which executor ran each step's handler to its end.
type effects struct {
	mu  sync.Mutex
	ran map[string][]string // step key: the executors that ran it
}

func newEffects() *effects { return &effects{ran: map[string][]string{}} }

func (e *effects) handler(executor string, delay time.Duration) events.Handler {
	return func(ctx context.Context, s *events.StepEvent) (events.Report, error) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return events.Report{}, ctx.Err()
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.ran[s.Step.Key] = append(e.ran[s.Step.Key], executor)
		return events.Report{Message: "did " + s.Step.Target.Name}, nil
	}
}

// check fails unless every one of keys ran exactly once, and nothing else.
func (e *effects) check(t *testing.T, keys []string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range keys {
		if n := len(e.ran[k]); n != 1 {
			t.Errorf("step %s ran %d times (by %v); want exactly once", k, n, e.ran[k])
		}
	}
	if len(e.ran) != len(keys) {
		t.Errorf("%d steps ran; want %d", len(e.ran), len(keys))
	}
}

// succeeded waits, for within, until every one of keys has a Succeeded
// result.
func succeeded(t *testing.T, r *results, keys []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		done := map[string]bool{}
		r.mu.Lock()
		for _, ev := range r.all {
			if ev.Outcome == events.Succeeded {
				done[ev.StepKey] = true
			}
		}
		r.mu.Unlock()
		var missing []string
		for _, k := range keys {
			if !done[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no success of %d steps after %s: %v", len(missing), within, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func connect(t *testing.T, ctx context.Context, opts events.BusOptions) *events.Bus {
	t.Helper()
	b, err := events.Connect(ctx, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestStreamsReplicatedOnCluster: on a cluster of three JetStream servers
// the streams and consumers get three replicas by default; streams made
// with one are scaled up in place by Connect, and a step left unacked in
// them is run afterwards; more replicas than servers is an error naming
// the value, which leaves the streams as they were.
func TestStreamsReplicatedOnCluster(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	js := c.JetStream

	// A fresh cluster: three replicas.
	rep, err := events.EnsureStreamsReplicas(ctx, js, events.AutoReplicas)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replicas != 3 || !strings.Contains(rep.Reason, `cluster "ferry-test" has at least 3 JetStream servers`) {
		t.Errorf("auto chose %+v; want 3, for the cluster's three servers", rep)
	}
	for _, s := range []string{events.StreamSteps, events.StreamResults} {
		waitReplicas(t, js, s, 3)
	}

	// Streams of one replica, as an earlier ferry made them, with steps
	// waiting and one delivered but not acked when ferry restarts.
	for _, s := range []string{events.StreamSteps, events.StreamResults} {
		if err := js.DeleteStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := events.EnsureStreamsReplicas(ctx, js, 1); err != nil || rep.Replicas != 1 {
		t.Fatalf("streams of one replica: %+v, %v", rep, err)
	}
	waitReplicas(t, js, events.StreamSteps, 1)
	var keys []string
	for i := range 5 {
		ev := stepEvent("p1", fmt.Sprint("s", i))
		publish(t, js, ev)
		keys = append(keys, ev.Step.Key)
	}
	consumer := events.ConsumerName("test")
	cons, err := js.CreateOrUpdateConsumer(ctx, events.StreamSteps, jetstream.ConsumerConfig{
		Durable: consumer, FilterSubject: events.StepsPrefix + "test.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
		// Taken and never acked: the executor that took it died.
	}

	// Connect scales both streams, and the consumer with them, up in place.
	var logs bytes.Buffer
	b := connect(t, logging.With(ctx, slog.New(slog.NewTextHandler(&logs, nil))), events.BusOptions{URL: c.URL, TLSCA: c.CA})
	if b.Replication.Replicas != 3 {
		t.Errorf("Connect chose %+v; want 3", b.Replication)
	}
	if !strings.Contains(logs.String(), "replicas=3") {
		t.Errorf("Connect's log does not say it chose 3 replicas:\n%s", logs.String())
	}
	info := waitReplicas(t, js, events.StreamSteps, 3, consumer)
	if info.State.Msgs != 5 {
		t.Errorf("FERRY_STEPS holds %d steps after the scale-up; want the 5 published before", info.State.Msgs)
	}
	waitReplicas(t, js, events.StreamResults, 3)

	// Every step, the one taken before among them, runs once.
	res := collect(t, b.JS)
	ran := newEffects()
	startWorker(t, b.JS, events.WorkerOptions{Kind: "test", AckWait: time.Second}, ran.handler("executor", 0))
	succeeded(t, res, keys, 30*time.Second)
	waitEmpty(t, js)
	ran.check(t, keys)

	// Five replicas on three servers: refused, naming the value; the
	// streams keep their three.
	_, err = events.Connect(ctx, events.BusOptions{URL: c.URL, TLSCA: c.CA, Replicas: 5})
	if !errors.Is(err, events.ErrReplicas) || !strings.Contains(fmt.Sprint(err), "--nats-replicas 5") {
		t.Errorf("Connect with 5 replicas on 3 servers: %v; want ErrReplicas naming --nats-replicas 5", err)
	}
	waitReplicas(t, js, events.StreamSteps, 3)
}

// TestStreamsSingleServer: the embedded server keeps one replica of each
// stream, and the log says so and why; asking it for more is an error.
func TestStreamsSingleServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs bytes.Buffer
	dir := t.TempDir()
	b := connect(t, logging.With(ctx, slog.New(slog.NewTextHandler(&logs, nil))), events.BusOptions{DataDir: dir})
	if b.Replication.Replicas != 1 {
		t.Errorf("embedded server: %+v; want 1 replica", b.Replication)
	}
	for _, want := range []string{"replicas=1", "is not in a cluster, so it is the only JetStream server"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("Connect's log does not say %q:\n%s", want, logs.String())
		}
	}
	for _, name := range []string{events.StreamSteps, events.StreamResults} {
		s, err := b.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 1 {
			t.Errorf("%s has %d replicas; want 1", name, got)
		}
	}
	_, err := events.Connect(ctx, events.BusOptions{URL: testenv.StartNATS(t).URL, Replicas: 3})
	if !errors.Is(err, events.ErrReplicas) || !strings.Contains(fmt.Sprint(err), "--nats-replicas 3") || !strings.Contains(fmt.Sprint(err), "not in a cluster") {
		t.Errorf("Connect with 3 replicas to one server: %v; want ErrReplicas naming --nats-replicas 3", err)
	}
}

// TestStepsSurviveStreamLeaderLoss: the node that leads FERRY_STEPS stops
// while steps run, more are published and another executor starts; the two
// left keep quorum, and every step runs exactly once, with its result,
// before the node is back.
func TestStepsSurviveStreamLeaderLoss(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Two executor replicas and the reconciler, each with a connection of
	// its own to any node.
	reconciler := connect(t, ctx, events.BusOptions{URL: c.URL, TLSCA: c.CA, Name: "reconciler"})
	waitReplicas(t, c.JetStream, events.StreamSteps, 3)
	res := collect(t, reconciler.JS)
	ran := newEffects()
	executor := func(i int) {
		exec := connect(t, ctx, events.BusOptions{URL: c.URL, TLSCA: c.CA, Name: fmt.Sprint("executor-", i)})
		startWorker(t, exec.JS, events.WorkerOptions{Kind: "test", Concurrency: 2}, ran.handler(fmt.Sprint("executor-", i), 100*time.Millisecond))
	}
	executor(0)
	executor(1)
	waitReplicas(t, c.JetStream, events.StreamSteps, 3, events.ConsumerName("test"))

	var keys []string
	pub := &events.Publisher{JS: reconciler.JS}
	publishSome := func(from, to int) { keys = append(keys, publishSteps(t, ctx, pub, from, to)...) }
	publishSome(0, 20)
	leader := c.StreamLeader(t, events.StreamSteps)
	t.Logf("stopping node %s, the leader of %s", c.Name(leader), events.StreamSteps)
	c.Stop(t, leader)
	// A third replica starts while the stream elects its next leader: it
	// creates the same consumer, asking again until the cluster answers.
	executor(2)
	publishSome(20, 40)
	start := time.Now()
	succeeded(t, res, keys, 90*time.Second)
	t.Logf("all succeeded %s after the stop", time.Since(start))
	drained(t, reconciler.JS)
	c.Restart(t, leader)
	ran.check(t, keys)
}

// drained waits, for a minute at most, until FERRY_STEPS holds nothing:
// every step settled, the acks of those that succeeded taken by the
// stream's (new) leader.
func drained(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	poll(t, "FERRY_STEPS not drained", func(ctx context.Context) (bool, string, error) {
		s, err := js.Stream(ctx, events.StreamSteps)
		if err != nil {
			return false, "", err
		}
		info := s.CachedInfo() // js.Stream asked for it just now
		return info.State.Msgs == 0, fmt.Sprintf("%d steps left", info.State.Msgs), nil
	})
}

// TestStepsSurviveStreamLeaderPartition: the node that leads FERRY_STEPS
// is cut off from the others while steps run; the two left elect a leader
// and run what the reconciler, a client of theirs, publishes. After Heal
// every step has succeeded, and none ran twice on the majority's side. A
// step may run a second time there after the executor on the cut-off node
// ran it: that node's consumer leader goes on handing out steps until it
// notices it lost its quorum, JetStream delivers at least once, and
// steps are idempotent for that reason (docs/architecture.md).
func TestStepsSurviveStreamLeaderPartition(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setup := connect(t, ctx, events.BusOptions{URL: c.URL, TLSCA: c.CA})
	waitReplicas(t, setup.JS, events.StreamSteps, 3)
	leader := c.StreamLeader(t, events.StreamSteps)
	// The reconciler is on the majority's side; one executor on each node.
	reconciler := connect(t, ctx, events.BusOptions{URL: c.ClientURL((leader + 1) % 3), TLSCA: c.CA, Name: "reconciler"})
	res := collect(t, reconciler.JS)
	ran := newEffects()
	for i := range 3 {
		exec := connect(t, ctx, events.BusOptions{URL: c.ClientURL(i), TLSCA: c.CA, Name: c.Name(i)})
		startWorker(t, exec.JS, events.WorkerOptions{Kind: "test", Concurrency: 2}, ran.handler(c.Name(i), 300*time.Millisecond))
	}
	waitReplicas(t, setup.JS, events.StreamSteps, 3, events.ConsumerName("test"))

	var keys []string
	pub := &events.Publisher{JS: reconciler.JS}
	publishSome := func(from, to int) { keys = append(keys, publishSteps(t, ctx, pub, from, to)...) }
	publishSome(0, 20)
	t.Logf("cutting node %s, the leader of %s, off", c.Name(leader), events.StreamSteps)
	c.Partition(t, leader)
	publishSome(20, 40)
	time.Sleep(5 * time.Second) // the majority works on; the worker cut off waits
	c.Heal(t, leader)
	succeeded(t, res, keys, 90*time.Second)
	drained(t, reconciler.JS)
	ran.mu.Lock()
	defer ran.mu.Unlock()
	twice := 0
	for _, k := range keys {
		majority := 0
		for _, by := range ran.ran[k] {
			if by != c.Name(leader) {
				majority++
			}
		}
		if majority > 1 || len(ran.ran[k]) == 0 {
			t.Errorf("step %s ran %d times, by %v; want once, or once more by %s, which was cut off", k, len(ran.ran[k]), ran.ran[k], c.Name(leader))
		}
		if len(ran.ran[k]) > 1 {
			twice++
		}
	}
	t.Logf("%d of %d steps ran twice, once on the node cut off", twice, len(keys))
}

// TestLongStepNotTakenTwice: a step that runs for many AckWaits, as a
// drain does, is not redelivered while its executor lives, also when the
// node that leads its consumer stops in the middle: the in-progress
// signals reach the new leader.
func TestLongStepNotTakenTwice(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reconciler := connect(t, ctx, events.BusOptions{URL: c.URL, TLSCA: c.CA, Name: "reconciler"})
	res := collect(t, reconciler.JS)
	const ackWait = time.Second
	started := make(chan string, 4)
	ran := newEffects()
	for i := range 2 {
		name := fmt.Sprint("executor-", i)
		exec := connect(t, ctx, events.BusOptions{URL: c.URL, TLSCA: c.CA, Name: name})
		drain := ran.handler(name, 6*ackWait)
		startWorker(t, exec.JS, events.WorkerOptions{Kind: "test", AckWait: ackWait}, func(ctx context.Context, s *events.StepEvent) (events.Report, error) {
			started <- name
			return drain(ctx, s)
		})
	}
	consumer := events.ConsumerName("test")
	waitReplicas(t, c.JetStream, events.StreamSteps, 3, consumer)
	ev := stepEvent("p1", "drain")
	publish(t, reconciler.JS, ev)
	by := <-started
	leader := -1
	poll(t, "no leader of consumer "+consumer, func(ctx context.Context) (bool, string, error) {
		cons, err := c.JetStream.Consumer(ctx, events.StreamSteps, consumer)
		if err != nil {
			return false, "", err
		}
		for i := range c.Len() {
			if c.Name(i) == cons.CachedInfo().Cluster.Leader {
				leader = i
			}
		}
		return leader >= 0, fmt.Sprintf("%+v", cons.CachedInfo().Cluster), nil
	})
	t.Logf("%s runs the step; stopping %s, the leader of its consumer", by, c.Name(leader))
	c.Stop(t, leader)
	succeeded(t, res, []string{ev.Step.Key}, time.Minute)
	drained(t, reconciler.JS)
	select {
	case again := <-started:
		t.Errorf("the step started again on %s while %s ran it", again, by)
	default:
	}
	ran.check(t, []string{ev.Step.Key})
}

// publishSteps publishes steps s<from> to s<to-1> of plan p1 and returns
// their keys.
func publishSteps(t *testing.T, ctx context.Context, pub *events.Publisher, from, to int) []string {
	t.Helper()
	var keys []string
	for i := from; i < to; i++ {
		ev := stepEvent("p1", fmt.Sprint("s", i))
		if _, err := pub.PublishStep(ctx, ev); err != nil {
			t.Fatalf("publish step %d: %v", i, err)
		}
		keys = append(keys, ev.Step.Key)
	}
	return keys
}
