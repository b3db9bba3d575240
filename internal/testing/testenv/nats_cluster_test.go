package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestNATSCluster proves the three nodes are one JetStream cluster with
// real routes: an R3 stream has a peer on every node, it goes on taking
// messages with its leader stopped and with a node cut off, and a stopped
// node comes back on its store and catches up.
func TestNATSCluster(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	js := c.JetStream

	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "CLUSTER", Subjects: []string{"cluster.>"}, Storage: jetstream.FileStorage, Replicas: 3,
	})
	if err != nil {
		t.Fatalf("create an R3 stream: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.Cluster == nil || info.Cluster.Name != "ferry-test" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v; want cluster ferry-test, a leader and two other peers", info.Cluster)
	}
	publish := func(js jetstream.JetStream, what string) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// JetStream answers nothing while a new leader is elected: ask
		// again, as a client does.
		for {
			// Each attempt briefly: a publish sent while the stream has
			// no leader is lost, and would wait out the whole deadline.
			actx, cancel := context.WithTimeout(pctx, 2*time.Second)
			_, err := js.Publish(actx, "cluster."+what, []byte(what), jetstream.WithMsgID(what))
			cancel()
			if err == nil {
				return
			}
			if pctx.Err() != nil {
				t.Fatalf("publish %s: %v", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	publish(js, "before")

	// Stop the leader: the other two elect one and keep the stream.
	leader := c.StreamLeader(t, "CLUSTER")
	c.Stop(t, leader)
	if c.Server(leader) != nil {
		t.Fatalf("node %d still runs after Stop", leader)
	}
	publish(js, "leader-down")
	if now := c.StreamLeader(t, "CLUSTER"); now == leader {
		t.Fatalf("stopped node %d still leads the stream", leader)
	}
	c.Restart(t, leader)

	// Cut another node off: the remaining two still take messages from a
	// client of theirs, and the one cut off has caught up after Heal.
	cut := (leader + 1) % 3
	c.Partition(t, cut)
	nc, err := nats.Connect(c.ClientURL((cut + 1) % 3))
	if err != nil {
		t.Fatalf("connect to node %d: %v", (cut+1)%3, err)
	}
	defer nc.Close()
	majority, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	publish(majority, "partitioned")
	c.Heal(t, cut)
	publish(js, "healed")

	// Every node, the restarted and the healed one among them, ends up
	// with all four messages in its own store.
	deadline := time.Now().Add(time.Minute)
	for i := range c.Len() {
		for {
			var msgs uint64
			if s := c.Server(i); s != nil {
				// The node's own view (its store), not the leader's.
				if jsz, err := s.Jsz(&server.JSzOptions{Streams: true}); err == nil {
					for _, acc := range jsz.AccountDetails {
						for _, sd := range acc.Streams {
							if sd.Name == "CLUSTER" {
								msgs = sd.State.Msgs
							}
						}
					}
				}
			}
			if msgs == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s holds %d messages of CLUSTER; want 4", c.Name(i), msgs)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
