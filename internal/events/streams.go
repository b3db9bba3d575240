package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/logging"
)

// Defaults of the streams.
const (
	// DuplicateWindow is how long JetStream remembers a step's ID: a step
	// published again within it is dropped.
	DuplicateWindow = 10 * time.Minute
	// ResultsMaxAge is how long results are kept for audit.
	ResultsMaxAge = 30 * 24 * time.Hour
)

// Replicas of the streams.
const (
	// AutoReplicas asks EnsureStreamsReplicas to choose: ClusterReplicas
	// when the cluster can place that many, else 1.
	AutoReplicas = 0
	// ClusterReplicas is what AutoReplicas chooses on a cluster of at least
	// three JetStream servers: the fewest that keep a quorum, and so the
	// streams, with one server down.
	ClusterReplicas = 3
)

// ErrReplicas is returned (wrapped) by EnsureStreamsReplicas and Connect
// when the NATS servers cannot hold the replicas asked for: more than the
// cluster has JetStream servers up, or more than one on a server that is
// not in a cluster. The streams are left as they were.
var ErrReplicas = errors.New("more stream replicas than JetStream servers")

// JetStream API error codes (nats-server's jetstream_errors.json) that say
// a stream cannot be placed on as many servers as asked.
const (
	errCodeNoPeers               jetstream.ErrorCode = 10005 // no suitable peers for placement
	errCodeInsufficientResources jetstream.ErrorCode = 10023
	errCodeClusterUnavailable    jetstream.ErrorCode = 10008 // no meta leader (yet)
	errCodeReplicasNotSupported  jetstream.ErrorCode = 10074 // a server not in a cluster
)

// Replication is how many replicas ferry's streams have, and why.
type Replication struct {
	Replicas int
	// Reason says why, for the log at start-up.
	Reason string
}

// EnsureStreams is EnsureStreamsReplicas with AutoReplicas.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	_, err := EnsureStreamsReplicas(ctx, js, AutoReplicas)
	return err
}

// EnsureStreamsReplicas creates the FERRY_STEPS and FERRY_RESULTS streams
// with replicas copies each, or updates them to this configuration: a
// stream with fewer replicas is scaled up in place, keeping every message
// and consumer, never deleted and created again. It is idempotent and safe
// to run from every reconciler replica at start-up. Executors do not run
// it, since their user may not change a stream: Connect has them wait for
// the reconciler's streams instead.
//
// AutoReplicas chooses ClusterReplicas when JetStream can place that many
// copies of FERRY_STEPS, 1 otherwise (a server not in a cluster, the
// embedded one among them, or a cluster of fewer than three JetStream
// servers up), and never fewer than FERRY_STEPS has already: a restart
// while a node is down does not scale the streams down. The consumers of
// the streams set no replicas of their own, so they follow the stream's.
//
// How many JetStream servers there are is JetStream's own answer to the
// placement of a stream, not a count of servers seen by the client: the
// URLs that the client learns (nats.Conn.Servers) include servers without
// JetStream, leave out those started with no_advertise or behind a load
// balancer, and nothing but the system account may ask the servers for
// their JetStream peers. Placement answers the question that matters,
// whether the cluster can hold this many copies of this stream, and is
// what a later scale-up would be refused by anyway.
//
// A value of replicas above what the servers can hold fails with
// ErrReplicas, naming it. While the cluster has no JetStream leader (it is
// starting, or electing one) it asks again until ctx ends.
func EnsureStreamsReplicas(ctx context.Context, js jetstream.JetStream, replicas int) (Replication, error) {
	if replicas < 0 {
		return Replication{}, fmt.Errorf("ensure streams: %d replicas; want 1 or more, or AutoReplicas", replicas)
	}
	cfgs := streamConfigs()
	var chosen Replication
	if replicas == AutoReplicas {
		var err error
		if chosen, err = autoReplicas(ctx, js, cfgs[0]); err != nil {
			return chosen, err
		}
		cfgs = cfgs[1:] // the first one is in place: autoReplicas placed it
	} else {
		chosen = Replication{Replicas: replicas, Reason: "as asked (--nats-replicas)"}
	}
	for _, cfg := range cfgs {
		cfg.Replicas = chosen.Replicas
		if err := createOrUpdate(ctx, js, cfg); err != nil {
			if cannotPlace(err) {
				return chosen, fmt.Errorf("ensure stream %s with --nats-replicas %d: %w: %s%s", cfg.Name, cfg.Replicas, ErrReplicas, where(js.Conn()), apiDescription(err))
			}
			return chosen, err
		}
	}
	return chosen, nil
}

// awaitStreams is an executor's EnsureStreamsReplicas: it changes no
// stream, since only the reconciler's user may (RolePermissions), and
// waits instead until the reconciler has created both, each with at least
// replicas copies unless AutoReplicas, asking every few seconds and
// logging what it waits for. It returns the replicas FERRY_STEPS has, and
// an error once ctx ends.
func awaitStreams(ctx context.Context, js jetstream.JetStream, replicas int) (Replication, error) {
	if replicas < 0 {
		return Replication{}, fmt.Errorf("wait for streams: %d replicas; want 1 or more, or AutoReplicas", replicas)
	}
	var chosen Replication
	for _, cfg := range streamConfigs() {
		have, err := awaitStream(ctx, js, cfg.Name, replicas)
		if err != nil {
			return chosen, err
		}
		if cfg.Name == StreamSteps {
			chosen = Replication{Replicas: have, Reason: "the reconciler's: an executor changes no stream"}
			if replicas != AutoReplicas {
				chosen.Reason = fmt.Sprintf("the reconciler's, at least %d as asked (--nats-replicas): an executor changes no stream", replicas)
			}
		}
	}
	return chosen, nil
}

// awaitStream waits until stream name exists with at least replicas
// copies (any number with AutoReplicas), and returns how many it has.
func awaitStream(ctx context.Context, js jetstream.JetStream, name string, replicas int) (int, error) {
	logged := ""
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		have := 0
		err := untilAnswered(ctx, func(ctx context.Context) error {
			s, err := js.Stream(ctx, name)
			if err == nil {
				have = s.CachedInfo().Config.Replicas
			}
			return err
		})
		var waiting string
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			waiting = "waiting for the reconciler to create stream " + name
		case err != nil:
			return 0, fmt.Errorf("look up stream %s: %w", name, err)
		case have >= replicas:
			return have, nil
		default:
			waiting = fmt.Sprintf("waiting for the reconciler to scale stream %s to %d replicas (--nats-replicas); it has %d", name, replicas, have)
		}
		if waiting != logged {
			logging.From(ctx).Info(waiting, "stream", name)
			logged = waiting
		}
		select {
		case <-ctx.Done():
			return have, fmt.Errorf("%s: %w", waiting, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// streamConfigs are the streams' configurations, FERRY_STEPS first, with
// no replicas set.
func streamConfigs() []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:        StreamSteps,
			Description: "ferry: runnable steps, one durable consumer per executor kind",
			Subjects:    []string{StepsPrefix + ">"},
			// Work queue: a step is removed once an executor acked it.
			Retention:  jetstream.WorkQueuePolicy,
			Storage:    jetstream.FileStorage,
			Duplicates: DuplicateWindow,
		},
		{
			Name:        StreamResults,
			Description: "ferry: step results and progress, kept for audit",
			Subjects:    []string{ResultsPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      ResultsMaxAge,
			Duplicates:  DuplicateWindow,
		},
	}
}

// autoReplicas chooses the replicas as EnsureStreamsReplicas says, by
// creating or updating cfg with ClusterReplicas and falling back to fewer
// when JetStream cannot place them.
func autoReplicas(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (Replication, error) {
	have := 0
	err := untilAnswered(ctx, func(ctx context.Context) error {
		s, err := js.Stream(ctx, cfg.Name)
		if err == nil {
			have = s.CachedInfo().Config.Replicas
		}
		return err
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return Replication{}, fmt.Errorf("look up stream %s: %w", cfg.Name, err)
	}
	nc := js.Conn()
	cluster := nc.ConnectedClusterName()
	var chosen Replication
	switch {
	case have >= ClusterReplicas:
		chosen = Replication{Replicas: have, Reason: fmt.Sprintf("auto: stream %s already has %d replicas, and auto never lowers them", cfg.Name, have)}
	case cluster == "":
		// A server not in a cluster holds one copy of each stream;
		// asking it for more fails, so there is nothing to try.
		return placeAuto(ctx, js, cfg, max(have, 1), "auto: the NATS server "+serverName(nc)+" is not in a cluster, so it is the only JetStream server")
	default:
		chosen = Replication{Replicas: ClusterReplicas, Reason: fmt.Sprintf("auto: cluster %q has at least %d JetStream servers (it placed %d replicas of %s)", cluster, ClusterReplicas, ClusterReplicas, cfg.Name)}
	}
	cfg.Replicas = chosen.Replicas
	err = createOrUpdate(ctx, js, cfg)
	if err == nil {
		return chosen, nil
	}
	if !cannotPlace(err) {
		return chosen, err
	}
	fewer := max(have, 1)
	return placeAuto(ctx, js, cfg, fewer, fmt.Sprintf("auto: cluster %q has fewer than %d JetStream servers up (%v)", cluster, ClusterReplicas, apiDescription(err)))
}

// placeAuto creates or updates cfg with replicas copies, as chosen for
// reason.
func placeAuto(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, replicas int, reason string) (Replication, error) {
	cfg.Replicas = replicas
	chosen := Replication{Replicas: replicas, Reason: reason}
	if err := createOrUpdate(ctx, js, cfg); err != nil {
		return chosen, err
	}
	return chosen, nil
}

// createOrUpdate creates or updates a stream, asking again while the
// cluster has no JetStream leader to answer: at start-up, the servers and
// ferry often come up together.
func createOrUpdate(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	err := untilAnswered(ctx, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("create or update stream %s with %d replicas: %w", cfg.Name, cfg.Replicas, err)
	}
	return nil
}

// APIAttempt bounds one attempt of a JetStream request. JetStream does not
// answer while the stream (or the cluster's metadata) has no leader: a
// replicated stream whose leader's server went away elects another within
// seconds, and a request sent meanwhile is lost, not queued.
const APIAttempt = 5 * time.Second

// untilAnswered runs request, each attempt bounded by APIAttempt, until it
// succeeds, fails with an error that asking again cannot cure, or ctx ends.
// Callers make the request safe to repeat (a message ID, a create-or-update).
func untilAnswered(ctx context.Context, request func(context.Context) error) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		actx, cancel := context.WithTimeout(ctx, APIAttempt)
		err := request(actx)
		cancel()
		if err == nil || !unavailable(ctx, err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// unavailable reports an error of a JetStream request that asking again
// may cure: no JetStream leader yet, or no answer in time while ctx lasts.
func unavailable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.ErrorCode == errCodeClusterUnavailable
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// cannotPlace reports JetStream's refusal to place a stream on as many
// servers as asked.
func cannotPlace(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case errCodeNoPeers, errCodeInsufficientResources, errCodeReplicasNotSupported:
		return true
	}
	return false
}

// apiDescription is JetStream's description of err, without the request
// that failed.
func apiDescription(err error) string {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.Description
	}
	return err.Error()
}

// where says which servers answered, for an ErrReplicas.
func where(nc *nats.Conn) string {
	if cluster := nc.ConnectedClusterName(); cluster != "" {
		return fmt.Sprintf("cluster %q cannot place them: ", cluster)
	}
	return "the NATS server " + serverName(nc) + " is not in a cluster and holds one: "
}

// serverName names the server nc is connected to.
func serverName(nc *nats.Conn) string {
	if name := nc.ConnectedServerName(); name != "" {
		return fmt.Sprintf("%q", name)
	}
	return nc.ConnectedAddr()
}
