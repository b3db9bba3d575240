package planner

import (
	"fmt"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The adopt strategy (seed 000): the running nodes stay, and CAPI's objects
// are rebuilt around them with OpenStack infrastructure kinds, created
// paused, wired together, then unpaused. Objects are created with their
// final references; the patch steps are for objects that already exist
// with another provider's kinds (restored from the old management cluster).

// adoptCluster: the Secrets, the Cluster and its OpenStackCluster.
func adoptCluster(c *planCtx, b *phaseBuilder) {
	s := c.snap
	from := ""
	if c.plan.Spec.Adopt != nil {
		from = c.plan.Spec.Adopt.SecretsFrom
	}
	for _, suffix := range adoptSecrets(c) {
		name := c.name + "-" + suffix
		if sec := s.Secret(c.ns, name); sec != nil {
			// Cluster API's managers cache only the Secrets with the
			// cluster's label: one they cannot see, they create again.
			b.step(sec.Cluster == c.name, step.Kube, step.Label, step.Target{Kind: step.Secret, Name: name},
				step.NewParams("cluster.x-k8s.io/cluster-name", c.name), "Cluster API's managers see only the Secrets that carry the cluster's label")
			continue
		}
		switch {
		case from == "":
			b.block("Secret %s/%s is missing and ferry never generates it (a new one would cut off the running nodes): restore it, or name a namespace with a copy in spec.adopt.secretsFrom", c.ns, name)
		case s.Secret(from, name) == nil:
			b.block("Secret %s/%s is missing, and so is its copy %s/%s", c.ns, name, from, name)
		}
		b.step(false, step.Kube, step.CopySecret, step.Target{Kind: step.Secret, Name: name},
			step.NewParams(step.ParamFrom, step.NamespacedName(from, name)), "taken over from the running cluster, never regenerated")
	}
	b.group()
	b.identitySecret(c)
	b.group()
	ensureKeypair(c, b)
	b.group()

	cl := s.Cluster
	osc := step.Target{Kind: step.OpenStackCluster, Name: c.name}
	wired := cl != nil && cl.InfrastructureRef == observed.Ref{Kind: step.OpenStackCluster, Name: c.name}
	if cl == nil {
		b.step(false, step.Kube, step.Create, step.Target{Kind: step.Cluster, Name: c.name},
			step.NewParams(step.ParamPaused, step.Bool(true), step.ParamInfrastructureRef, step.Ref(osc.Kind, osc.Name),
				step.ParamControlPlaneRef, step.Ref(c.plan.Spec.Target.ControlPlane.Provider, c.plan.Spec.Target.ControlPlane.Name),
				step.ParamControlPlaneEndpoint, "from the "+c.name+"-kubeconfig Secret"),
			"created paused so that CAPI does not act before its infrastructure exists")
	} else {
		b.step(wired, step.Kube, step.Patch, step.Target{Kind: step.Cluster, Name: c.name},
			step.NewParams(step.ParamPaused, step.Bool(true), step.ParamInfrastructureRef, step.Ref(osc.Kind, osc.Name)),
			fmt.Sprintf("infrastructureRef is %s/%s; paused while it is switched", cl.InfrastructureRef.Kind, cl.InfrastructureRef.Name))
	}
	b.group()
	b.openStackCluster(c)
	b.group()
	b.unpause(step.Cluster, c.name, wired, pauseOf(cl))
	b.group()
	b.waitOpenStackCluster(c)
}

// kamajiSecrets are the Secrets the Kamaji provider writes for Cluster
// API: the kubeconfig (the Machine controller reaches the workload cluster
// with it) and the CA (kubeadm bootstrap joins new workers with it). The
// hosted control plane keeps its etcd, service-account and front-proxy
// certificates in its own Secrets, which no Cluster API controller reads.
var kamajiSecrets = []string{"kubeconfig", "ca"}

// adoptSecrets are the suffixes of the Secrets <cluster>-<suffix> the
// cluster is adopted with.
func adoptSecrets(c *planCtx) []string {
	switch {
	case c.plan.Spec.Target.ControlPlane.Provider == v1alpha1.ProviderKamaji:
		return kamajiSecrets
	case c.snap.Workload != nil && c.snap.Workload.ExternalEtcd:
		return observed.SecretSuffixes
	}
	return observed.AdoptSecrets
}

func pauseOf(cl *observed.Cluster) observed.Pause {
	if cl == nil {
		return observed.Pause{}
	}
	return cl.Pause
}
