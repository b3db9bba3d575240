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
	// inbox is where nats.go's requests (every JetStream API call and
	// publish) and pull consumers take their answers.
	inbox = "_INBOX.>"
)

// RolePermissions is what a user of role may do on the bus, and nothing
// more: the reconciler publishes steps (never a result) and reads
// results; an executor takes steps, settles them and publishes results
// (never a step). Each needs, besides, the JetStream API requests of
// these (docs/install.md lists the subjects):
//
//   - both ensure the two streams at start-up (Connect:
//     EnsureStreamsReplicas), whichever starts first, and so may create,
//     update and read those two and no other stream;
//   - the reconciler makes its durable results consumer (RunResults) and
//     the ordered one of a replay (ReplayResults) on FERRY_RESULTS, pulls
//     from them and acks, and publishes and takes wakes (WakeSubject);
//   - an executor makes its kind's durable consumer on FERRY_STEPS
//     (RunWorker), pulls, acks, naks and terms (all on the ack subject),
//     and, for a step no delivery settled (WatchMaxDeliveries), takes the
//     advisory, reads the step and removes it.
//
// A process that does both, `reconciler run` with its executors in
// process, needs a user with both roles' permissions.
func RolePermissions(role Role) Permissions {
	var streams []string
	for _, s := range []string{StreamSteps, StreamResults} {
		for _, op := range []string{"CREATE", "UPDATE", "INFO"} {
			streams = append(streams, jsAPI+"STREAM."+op+"."+s)
		}
	}
	consumer := func(stream string, ops ...string) []string {
		var subjects []string
		for _, op := range ops {
			subjects = append(subjects, jsAPI+"CONSUMER."+op+"."+stream+".>")
		}
		return append(subjects, jsAck+stream+".>")
	}
	switch role {
	case RoleReconciler:
		return Permissions{
			Publish: slices.Concat([]string{StepsPrefix + ">", WakeSubject}, streams,
				consumer(StreamResults, "CREATE", "INFO", "DELETE", "MSG.NEXT")),
			Subscribe: []string{inbox, WakeSubject},
		}
	case RoleExecutor:
		return Permissions{
			Publish: slices.Concat([]string{ResultsPrefix + ">"}, streams,
				[]string{jsAPI + "STREAM.MSG.GET." + StreamSteps, jsAPI + "STREAM.MSG.DELETE." + StreamSteps},
				consumer(StreamSteps, "CREATE", "INFO", "MSG.NEXT")),
			Subscribe: []string{inbox, maxDeliveriesSubject},
		}
	}
	return Permissions{}
}
