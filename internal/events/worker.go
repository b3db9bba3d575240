package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/redact"
	"github.com/ferry-dev/ferry/internal/step"
)

// Handler carries out one step. Its error is terminal (failure.Terminal:
// reported Failed, never retried) or retryable (redelivered after a
// back-off until MaxDeliver).
type Handler func(ctx context.Context, step *StepEvent) (Report, error)

// WorkerOptions configure a worker. Zero values take the defaults.
type WorkerOptions struct {
	// Kind is the executor kind whose steps the worker takes; its durable
	// consumer is ferry-exec-<kind>, shared by every replica of the kind.
	Kind step.Kind
	// Concurrency is how many steps run at once. Default 4.
	Concurrency int
	// Waits is how many wait steps (action "wait") run at once besides
	// them: a wait watches until a controller is done, for minutes in a
	// real migration, and must not keep other plans' steps from running.
	// Default 64.
	Waits int
	// AckWait is how long a delivery may go without an ack or an
	// in-progress signal before JetStream redelivers it (the executor is
	// presumed dead): about how long the step of an executor that died
	// waits for another replica. The worker signals in-progress every
	// AckWait/5 until the step is settled, so a step that runs long, a
	// drain of an hour, is not redelivered while its executor lives, even
	// if four signals in a row are lost (a NATS server failing over).
	// Default 10s: BenchmarkDeadExecutorHandover measures 10s from an
	// executor's death to another replica running its step (30s with the
	// 30s this default was before).
	AckWait time.Duration
	// MaxDeliver is how many times a step is delivered before it is
	// reported Failed. Default 8: with the default back-off the last
	// attempt comes about three minutes after the first, so that an outage
	// of the Git remote, an API server or the cloud shorter than that does
	// not fail a step for good (5 attempts over 15 seconds did, in
	// `make chaos`).
	MaxDeliver int
	// BackOff is the delay before the first redelivery of a step that
	// failed with a retryable error; it doubles per attempt up to
	// MaxBackOff. Defaults 2s and 1m.
	BackOff, MaxBackOff time.Duration
	// StepTimeout bounds a step without a "timeout" parameter. Default 10m.
	StepTimeout time.Duration
}

func (o *WorkerOptions) defaults() {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Waits <= 0 {
		o.Waits = 64
	}
	if o.AckWait <= 0 {
		o.AckWait = 10 * time.Second
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = 8
	}
	if o.BackOff <= 0 {
		o.BackOff = 2 * time.Second
	}
	if o.MaxBackOff <= 0 {
		o.MaxBackOff = time.Minute
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 10 * time.Minute
	}
}

// ConsumerName is the durable consumer of an executor kind.
func ConsumerName(kind step.Kind) string { return "ferry-exec-" + string(kind) }

// backOff returns the delay before redelivering after attempt failed:
// BackOff doubled per attempt, capped at MaxBackOff.
func (o *WorkerOptions) backOff(attempt int) time.Duration {
	d := o.BackOff
	for i := 1; i < attempt && d < o.MaxBackOff; i++ {
		d *= 2
	}
	return min(d, o.MaxBackOff)
}

// RunWorker takes the steps of one executor kind from FERRY_STEPS and runs
// handler on each, publishing a result per attempt, until ctx ends. At
// shutdown, steps still running are handed back (nak) for another replica;
// none is lost. The streams must exist (EnsureStreams).
func RunWorker(ctx context.Context, js jetstream.JetStream, opts WorkerOptions, handler Handler) error {
	opts.defaults()
	if opts.Kind == "" {
		return errors.New("run worker: no executor kind")
	}
	iter, err := consume(ctx, js, opts)
	if err != nil {
		return err
	}
	w := &worker{opts: opts, handler: handler, pub: &Publisher{JS: js},
		slots: make(chan struct{}, opts.Concurrency), waits: make(chan struct{}, opts.Waits)}
	go func() {
		<-ctx.Done()
		iter.Stop()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		msg, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			if missedHeartbeat(err) {
				continue
			}
			return fmt.Errorf("consume %s: %w", ConsumerName(opts.Kind), err)
		}
		ev, ok := w.decode(ctx, msg)
		if !ok {
			continue
		}
		slots := w.slots
		if ev.Step.Action == step.Wait {
			slots = w.waits
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			_ = msg.Nak()
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			w.handle(ctx, msg, ev)
		}()
	}
}

// consume creates (or updates) the kind's durable consumer and starts
// pulling from it.
func consume(ctx context.Context, js jetstream.JetStream, opts WorkerOptions) (jetstream.MessagesContext, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       ConsumerName(opts.Kind),
		Description:   "ferry executors of kind " + string(opts.Kind),
		FilterSubject: StepsPrefix + string(opts.Kind) + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       opts.AckWait,
		MaxDeliver:    opts.MaxDeliver,
		MaxAckPending: 1000,
	}
	// Replicas of an executor start together and create the same consumer;
	// on a cluster, one of them may wait past a request's timeout while the
	// consumer's group forms. Asking again is safe: the config is the same.
	var cons jetstream.Consumer
	err := untilAnswered(ctx, func(ctx context.Context) error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(ctx, StreamSteps, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", ConsumerName(opts.Kind), err)
	}
	// Fetch no more than can run: a buffered message waits in this process
	// while another replica sits idle.
	iter, err := cons.Messages(jetstream.PullMaxMessages(opts.Concurrency), jetstream.PullExpiry(PullExpiry))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", ConsumerName(opts.Kind), err)
	}
	return iter, nil
}

// worker runs the deliveries of one executor kind.
type worker struct {
	opts    WorkerOptions
	handler Handler
	pub     *Publisher
	// slots and waits bound the steps running at once: waits those that
	// wait, slots the others.
	slots, waits chan struct{}
}

// decode reads a delivery's step event; a message that is not one is
// dropped for good.
func (w *worker) decode(ctx context.Context, msg jetstream.Msg) (*StepEvent, bool) {
	var ev StepEvent
	if err := json.Unmarshal(msg.Data(), &ev); err != nil || ev.Type != TypeStep {
		logging.From(ctx).Error("dropping a message that is not a step event", "executor", w.opts.Kind, "subject", msg.Subject(), "type", ev.Type, "error", err)
		_ = msg.TermWithReason("not a " + TypeStep + " event")
		return nil, false
	}
	return &ev, true
}

// handle runs one delivery of a step and settles it: ack after a success,
// term after a terminal error or the last delivery, nak with back-off
// otherwise. The result is published before the message is settled, so a
// crash in between repeats the (idempotent) step rather than losing its
// result.
func (w *worker) handle(ctx context.Context, msg jetstream.Msg, ev *StepEvent) {
	attempt := 1
	if meta, err := msg.Metadata(); err == nil {
		attempt = int(meta.NumDelivered)
	}
	// The executor logs through the context: every line it writes says
	// which plan, phase, step and attempt it concerns.
	ctx = logging.Attach(ctx, "executor", w.opts.Kind, "subject", msg.Subject(),
		"plan", ev.Plan, "revision", ev.Revision, "phase", ev.Step.Phase, "step", ev.Step.Key, "attempt", attempt)
	log := logging.From(ctx)

	stepCtx, cancel := context.WithTimeout(ctx, stepTimeout(w.opts, ev))
	defer cancel()
	// In progress until the message is settled, not only while the
	// handler runs: publishing the result may wait out a stream's leader
	// election, and a step redelivered meanwhile would run twice.
	stop := keepAlive(ctx, msg, w.opts.AckWait/keepAlivesPerAckWait)
	defer stop()
	log.Info("running step", "action", ev.Step.Action, "target", ev.Step.Target.String())
	start := time.Now()
	report, err := w.handler(stepCtx, ev)
	elapsed := time.Since(start)

	if ctx.Err() != nil && err != nil {
		// Shutting down: hand the step back untouched for another replica.
		log.Info("shutting down; step handed back", "error", err)
		_ = msg.Nak()
		return
	}
	res := newResult(ev, w.opts.Kind, attempt, elapsed, report)
	settle := w.outcome(res, err, msg, log)
	// Also at shutdown: the step ran, its result is worth the wait.
	settleCtx, cancelSettle := context.WithTimeout(context.WithoutCancel(ctx), SettleTimeout)
	defer cancelSettle()
	if perr := w.pub.PublishResult(settleCtx, res); perr != nil {
		// No result, no settlement: JetStream redelivers after AckWait and
		// the idempotent step runs again, so the result is not lost.
		log.Error("could not publish the result; the step will be redelivered", "error", perr)
		return
	}
	if serr := settle(settleCtx); serr != nil {
		log.Error("could not settle the step message", "error", serr)
	}
}

// SettleTimeout bounds publishing a step's result and settling its
// message once the step ran: long enough for a replicated stream to elect
// a new leader, short enough that a worker shutting down is not held up.
const SettleTimeout = 30 * time.Second

// ackSync acks msg and waits for JetStream to confirm it, asking again
// while it does not answer, until ctx ends. An ack sent and lost (its
// consumer's leader went away with it) would have the step that succeeded
// redelivered and run again; asking again is harmless, JetStream answers
// an ack of a message already acked.
func ackSync(ctx context.Context, msg jetstream.Msg) error {
	if err := untilAnswered(ctx, msg.DoubleAck); err != nil {
		return fmt.Errorf("ack step: %w", err)
	}
	return nil
}

// stepTimeout bounds one run of a step: its own timeout parameter plus a
// margin, so that the executor reports its timeout before the worker
// cancels it; else the worker's StepTimeout.
func stepTimeout(opts WorkerOptions, ev *StepEvent) time.Duration {
	if d, err := ev.Step.Params.Duration(step.ParamTimeout, 0); err == nil && d > 0 {
		return d + time.Minute
	}
	return opts.StepTimeout
}

// newResult is the result of one attempt at ev, its outcome not yet
// judged.
func newResult(ev *StepEvent, kind step.Kind, attempt int, elapsed time.Duration, report Report) *ResultEvent {
	return &ResultEvent{
		Type: TypeResult, StepID: ev.ID, Plan: ev.Plan, Revision: ev.Revision, Phase: ev.Step.Phase,
		StepKey: ev.Step.Key, Action: ev.Step.Action, Target: ev.Step.Target.String(), Executor: kind, Attempt: attempt, Duration: elapsed, Report: report,
		At: time.Now().UTC(),
	}
}

// judge sets a result's outcome from the handler's error, scrubbed
// (internal/redact): Succeeded
// without one; Failed, terminal, after a terminal error; Failed after a
// retryable one on the last of maxDeliver attempts; Retrying otherwise.
func judge(res *ResultEvent, err error, maxDeliver int) {
	if err != nil {
		// The error leaves the process on the bus: no secret in it.
		err = redact.Error(err)
	}
	switch {
	case err == nil:
		res.Outcome = Succeeded
	case failure.IsTerminal(err):
		res.Outcome, res.Error, res.Terminal = Failed, err.Error(), true
	case res.Attempt >= maxDeliver:
		res.Outcome, res.Error = Failed, fmt.Sprintf("gave up after %d attempts: %v", res.Attempt, err)
	default:
		res.Outcome, res.Error = Retrying, err.Error()
	}
}

// outcome judges a result from the handler's error and returns how to
// settle the message: ack after a success, term after a terminal error or
// the last delivery, nak with back-off otherwise.
func (w *worker) outcome(res *ResultEvent, err error, msg jetstream.Msg, log *slog.Logger) (settle func(context.Context) error) {
	judge(res, err, w.opts.MaxDeliver)
	switch {
	case res.Outcome == Succeeded:
		log.Info("step succeeded", "duration", res.Duration, "message", res.Report.Message)
		return func(ctx context.Context) error { return ackSync(ctx, msg) }
	case res.Terminal:
		log.Error("step failed; a person must act", "error", err)
		return func(context.Context) error { return msg.TermWithReason("terminal error") }
	case res.Outcome == Failed:
		log.Error("step failed on its last attempt", "error", err)
		return func(context.Context) error { return msg.TermWithReason("max deliveries") }
	}
	delay := w.opts.backOff(res.Attempt)
	log.Warn("step failed; retrying", "error", err, "retry_in", delay)
	// A nak lost with its consumer's leader costs a redelivery after
	// AckWait instead of after delay: the step was to run again anyway.
	return func(context.Context) error { return msg.NakWithDelay(delay) }
}

// keepAlivesPerAckWait is how many in-progress signals the worker sends
// per AckWait: all but one may be lost before a live executor's step is
// redelivered.
const keepAlivesPerAckWait = 5

// keepAlive tells JetStream every interval that the delivery is still being
// worked on, until the returned stop is called.
func keepAlive(ctx context.Context, msg jetstream.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// missedHeartbeat reports an iterator's missed idle heartbeat: the server
// or the process was too busy to keep the pull alive (a loaded machine, a
// server restart). It is not the end of the consumer: the iterator drops
// the pull and asks again on the next Next. Ending there instead left an
// executor, or the reconciler's results, with no consumer at all.
func missedHeartbeat(err error) bool { return errors.Is(err, jetstream.ErrNoHeartbeat) }
