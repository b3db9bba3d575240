package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// clustered is ferry's distributed layout in a test (docs/install.md,
// "Scaling out"): a three-node NATS cluster with three replicas of each
// stream, two `reconciler run --executors=false --leader-elect` replicas
// and three `reconciler executor` replicas. The processes are commands run
// in this test's process, each with its own flags, data directory, NATS
// connection and log; hack/demo's cluster layout runs them as processes.
type clustered struct {
	t    *testing.T
	nats *testenv.NATSCluster
	// leader and standby are the reconcilers: leader was started first
	// and leads; standby waits for the Lease. Gitea's webhook goes to the
	// standby, which passes it on to the leader over NATS.
	leader, standby *running
	executors       []*running
}

// startClusteredOnGitea is startRunOnGitea on the distributed layout: it
// returns Gitea, the leading reconciler, the layout and a reader of the
// status branch.
func startClusteredOnGitea(t *testing.T, ctx context.Context, mgmt *testenv.Kube, namespaces []string, files map[string]string, extra ...string) (*testenv.Gitea, *clustered, reconciler.GitStatusStore) {
	t.Helper()
	gt, git, reader := giteaForRun(t, files)
	c := &clustered{t: t, nats: testenv.StartNATSCluster(t, 3)}
	// Each role as its own NATS user, with only its permissions
	// (events.RolePermissions), as docs/install.md sets them up.
	reconcilerNATS := append(c.nats.RoleFlags(events.RoleReconciler), "--nats-replicas", "3")
	executorNATS := append(c.nats.RoleFlags(events.RoleExecutor), "--nats-replicas", "3")
	elect := func(identity string) []string {
		return []string{"--executors=false", "--leader-elect", "--leader-election-namespace", "ferry-system", "--leader-election-identity", identity}
	}
	c.leader = startRunWith(t, ctx, mgmt, namespaces, gt.Token(testenv.GiteaBot),
		slices.Concat(git, giteaForgeFlags(gt), reconcilerNATS, elect("reconciler-1"), extra)...)
	c.leader.waitFor("reconciler-1 to lead", func() bool { return strings.Contains(c.leader.log(), `msg=leading`) })

	// The standby: the same flags but its identity, data directory and
	// webhook address.
	hook := testenv.FreeAddr(t)
	args := slices.Clone(c.leader.args)
	setFlag(t, args, "--leader-election-identity", "reconciler-2")
	setFlag(t, args, "--data-dir", t.TempDir())
	setFlag(t, args, "--webhook-addr", hook)
	c.standby = c.start(ctx, "http://"+hook+"/", args)
	gt.AddWebhook(t, c.standby.webhookURL, string(c.standby.webhookSecret))

	kubeconfig := flagValue(t, c.leader.args, "--kubeconfig")
	for i := 1; i <= 3; i++ {
		c.executors = append(c.executors, c.start(ctx, "", slices.Concat([]string{"executor", "--kubeconfig", kubeconfig,
			"--data-dir", t.TempDir()}, git, executorNATS)))
	}
	return gt, c, reader
}

// start runs the command args (with its webhook at webhookURL, none for
// an executor) until the test ends, when it must exit 0.
func (c *clustered) start(ctx context.Context, webhookURL string, args []string) *running {
	t := c.t
	t.Helper()
	r := &running{t: t, ctx: ctx, webhookURL: webhookURL, webhookSecret: c.leader.webhookSecret, args: args}
	r.start()
	t.Cleanup(func() {
		r.stopRun()
		if <-r.exited; r.code != 0 && !t.Failed() {
			t.Errorf("reconciler %s exited %d; its log ends:\n%s", args[0], r.code, tail(r.log(), 30))
		}
	})
	return r
}

// handOver stops the leading reconciler, as a rolling update does, and
// waits until the standby leads; the stopped one starts again and stands
// by. It returns the new leader.
func (c *clustered) handOver() *running {
	c.t.Helper()
	old := c.leader
	old.stopRun()
	if <-old.exited; old.code != 0 {
		old.fatalf("the leading reconciler exited %d when stopped", old.code)
	}
	c.standby.waitFor("the standby to lead", func() bool { return strings.Contains(c.standby.log(), `msg=leading`) })
	c.leader, c.standby = c.standby, old
	old.mu.Lock()
	old.logs.WriteString("--- restarted ---\n")
	old.mu.Unlock()
	old.start()
	return c.leader
}

// logs is every process's log, for a failure's message.
func (c *clustered) logs() string {
	var b strings.Builder
	for i, r := range append([]*running{c.leader, c.standby}, c.executors...) {
		fmt.Fprintf(&b, "--- %s %d:\n%s\n", r.args[0], i, tail(r.log(), 30))
	}
	return b.String()
}

// flagValue is the value that follows name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no %s in %q", name, args)
	}
	return args[i+1]
}

// setFlag sets the value that follows name in args.
func setFlag(t *testing.T, args []string, name, value string) {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no %s in %q", name, args)
	}
	args[i+1] = value
}
