package events

import "slices"

// Role is what a ferry process does on the bus, and so what its NATS user
// may publish and subscribe to (RolePermissions).
type Role string

const (
	// RoleReconciler publishes steps and reads results: `reconciler run
	// --executors=false`.
	RoleReconciler Role = "reconciler"
	// RoleExecutor takes steps and publishes results: `reconciler
	// executor`.
	RoleExecutor Role = "executor"
)

// Roles are the roles, in the order the documentation lists them.
var Roles = []Role{RoleReconciler, RoleExecutor}

// Permissions are the subjects a NATS user may publish and subscribe to,
// as nats-server's allow lists take them; everything else is denied.
type Permissions struct {
	Publish, Subscribe []string
}

// JetStream's API subjects (requests to manage streams and consumers and
// to pull from them) and acknowledgement subjects.
const (
	jsAPI = "$JS.API."
	jsAck = "$JS.ACK."
)

// InboxPrefix is the prefix of the inboxes of a connection of role
// (nats.CustomInboxPrefix): where its requests, every JetStream API call
// and publish among them, and its pull consumers take their answers. Each
// role has its own, and its user may subscribe to that one alone, so that
// neither reads the other's answers. Both are under nats.go's default
// "_INBOX.", so that a user still allowed all of "_INBOX.>" keeps working.
func InboxPrefix(role Role) string { return "_INBOX.ferry-" + string(role) }

// RolePermissions is what a user of role may do on the bus, and nothing
// more: the reconciler publishes steps (never a result) and reads
// results; an executor takes steps, settles them and publishes results
// (never a step). Each reads the answers to its own requests only (its
// InboxPrefix). Each needs, besides, the JetStream API requests of these
// (docs/install.md lists the subjects):
//
//   - the reconciler creates the two streams, or updates them, at
//     start-up (Connect: EnsureStreamsReplicas), and may create, update
//     and read those two and no other stream;
//   - an executor only reads them: it waits at start-up until the
//     reconciler has created them (Connect), and may not create, update,
//     delete or purge any stream;
//   - the reconciler makes its durable results consumer (RunResults) and
//     the ordered one of a replay (ReplayResults) on FERRY_RESULTS, pulls
//     from them and acks, and publishes and takes wakes (WakeSubject);
//   - an executor makes its kind's durable consumer on FERRY_STEPS
//     (RunWorker), pulls, acks, naks and terms (all on the ack subject),
//     and, for a step no delivery settled (WatchMaxDeliveries), takes the
//     advisory, reads the step and removes it.
//
// A process that does both, `reconciler run` with its executors in
// process, connects as the reconciler (BusOptions.Role) and needs a user
// with both roles' permissions.
func RolePermissions(role Role) Permissions {
	streams := func(ops ...string) []string {
		var subjects []string
		for _, s := range []string{StreamSteps, StreamResults} {
			for _, op := range ops {
				subjects = append(subjects, jsAPI+"STREAM."+op+"."+s)
			}
		}
		return subjects
	}
	consumer := func(stream string, ops ...string) []string {
		var subjects []string
		for _, op := range ops {
			subjects = append(subjects, jsAPI+"CONSUMER."+op+"."+stream+".>")
		}
		return append(subjects, jsAck+stream+".>")
	}
	inbox := InboxPrefix(role) + ".>"
	switch role {
	case RoleReconciler:
		return Permissions{
			Publish: slices.Concat([]string{StepsPrefix + ">", WakeSubject}, streams("CREATE", "UPDATE", "INFO"),
				consumer(StreamResults, "CREATE", "INFO", "DELETE", "MSG.NEXT")),
			Subscribe: []string{inbox, WakeSubject},
		}
	case RoleExecutor:
		return Permissions{
			Publish: slices.Concat([]string{ResultsPrefix + ">"}, streams("INFO"),
				[]string{jsAPI + "STREAM.MSG.GET." + StreamSteps, jsAPI + "STREAM.MSG.DELETE." + StreamSteps},
				consumer(StreamSteps, "CREATE", "INFO", "MSG.NEXT")),
			Subscribe: []string{inbox, maxDeliveriesSubject},
		}
	}
	return Permissions{}
}
