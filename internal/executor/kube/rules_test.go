package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

const infraAPI = "infrastructure.cluster.x-k8s.io/v1beta1"

// Objects the table tests start from: the least each CRD accepts.

// TestKubePauses: ferry pauses what is not paused and marks it; it lifts
// only pauses it marked; a user's pause stays the user's, through a pause
// step and a patch that pauses. Every action runs twice.
func TestKubePauses(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	type act struct {
		action         step.Action
		params         map[string]string
		wantErr        string
		paused, marked bool // the state after the action
	}
	unpauseRefused := act{action: step.Unpause, wantErr: "paused by someone else; ferry never lifts a pause it did not set", paused: true}
	for _, tc := range []struct {
		name string
		obj  client.Object
		acts []act
	}{{
		name: "unpause refuses a user's pause of a Cluster",
		obj:  testCluster("user-paused", true),
		acts: []act{unpauseRefused},
	}, {
		name: "unpause refuses a user's pause of a MachineDeployment",
		obj:  testMD("user-paused-md", cluster, userPause...),
		acts: []act{unpauseRefused},
	}, {
		name: "unpause refuses a MachineDeployment's spec.paused even beside ferry's pause",
		obj: func() client.Object {
			md := testMD("spec-paused-md", cluster, ferryPause...)
			md.Spec.Paused = true
			return md
		}(),
		acts: []act{{action: step.Unpause, wantErr: "paused by someone else", paused: true, marked: true}},
	}, {
		name: "pause remembers a user pause of a Cluster: it is still not ferry's to lift",
		obj:  testCluster("remembered", true),
		acts: []act{{action: step.Pause, paused: true}, unpauseRefused},
	}, {
		name: "a patch that pauses leaves a user's pause the user's",
		obj:  testCluster("patched-user-paused", true),
		acts: []act{{action: step.Patch, params: map[string]string{"paused": "true", "infrastructureRef": "OpenStackCluster/x"}, paused: true}, unpauseRefused},
	}, {
		name: "pause then unpause a MachineDeployment",
		obj:  testMD("pool", cluster),
		acts: []act{{action: step.Pause, paused: true, marked: true}, {action: step.Unpause}},
	}, {
		name: "a patch that pauses a running Cluster marks the pause as ferry's",
		obj:  testCluster("running", false),
		acts: []act{{action: step.Patch, params: map[string]string{"paused": "true", "infrastructureRef": "OpenStackCluster/x"}, paused: true, marked: true}, {action: step.Unpause}},
	}, {
		name: "unpause lifts ferry's pause of a Machine",
		obj:  testMachine("adopted", ferryPause...),
		acts: []act{{action: step.Unpause}},
	}, {
		name: "unpause of an object nobody paused changes nothing",
		obj:  testKCP("kcp", 1),
		acts: []act{{action: step.Unpause}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			mustCreate(t, k.Client, tc.obj)
			for _, a := range tc.acts {
				ev := event(a.action, kindOf(t, k, tc.obj), tc.obj.GetName(), a.params)
				for attempt := 1; attempt <= 2; attempt++ {
					run(t, e, ev, a.wantErr)
					got := fresh(tc.obj)
					testenv.MustGet(t, k.Client, namespace, tc.obj.GetName(), got)
					if paused, marked := pauseState(got); paused != a.paused || marked != a.marked {
						t.Errorf("after %s (attempt %d): paused %t, ferry's mark %t; want %t, %t", a.action, attempt, paused, marked, a.paused, a.marked)
					}
				}
			}
		})
	}
}

// TestKubePatches: each patch sets what its parameters name, and a second
// run writes nothing (the resourceVersion stays).
func TestKubePatches(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	for _, tc := range []struct {
		name    string
		obj     client.Object
		params  map[string]string
		wantErr string
		check   func(t *testing.T, got client.Object)
	}{{
		name:   "Cluster: infrastructureRef switched to the OpenStackCluster",
		obj:    testCluster("switched", false),
		params: map[string]string{"infrastructureRef": "OpenStackCluster/switched"},
		check: func(t *testing.T, got client.Object) {
			testenv.Expect(t, "infrastructureRef", *got.(*clusterv1.Cluster).Spec.InfrastructureRef, refTo(infraAPI, "OpenStackCluster", "switched"))
		},
	}, {
		name:   "Cluster: controlPlaneRef to a KamajiControlPlane",
		obj:    testCluster("kamaji", false),
		params: map[string]string{"controlPlaneRef": "KamajiControlPlane/kamaji-cp"},
		check: func(t *testing.T, got client.Object) {
			testenv.Expect(t, "controlPlaneRef", *got.(*clusterv1.Cluster).Spec.ControlPlaneRef,
				refTo("controlplane.cluster.x-k8s.io/v1alpha1", "KamajiControlPlane", "kamaji-cp"))
		},
	}, {
		name:   "KubeadmControlPlane: machineTemplate.infrastructureRef",
		obj:    testKCP("kcp-template", 1),
		params: map[string]string{"machineTemplate.infrastructureRef": "OpenStackMachineTemplate/cp"},
		check: func(t *testing.T, got client.Object) {
			testenv.Expect(t, "infrastructureRef", got.(*controlplanev1.KubeadmControlPlane).Spec.MachineTemplate.InfrastructureRef,
				refTo(infraAPI, "OpenStackMachineTemplate", "cp"))
		},
	}, {
		name:   "KubeadmControlPlane: rolloutAfter=now, once however often it is delivered",
		obj:    testKCP("kcp-rollout", 1),
		params: map[string]string{"rolloutAfter": "now"},
		check: func(t *testing.T, got client.Object) {
			r := got.(*controlplanev1.KubeadmControlPlane).Spec.RolloutAfter
			if r == nil || time.Since(r.Time) > time.Minute {
				t.Errorf("rolloutAfter = %v; want about now", r)
			}
		},
	}, {
		name:   "MachineSet: infrastructureRef kind switched to OpenStackMachineTemplate",
		obj:    testMachineSet("set", "pool-a"),
		params: map[string]string{"infrastructureRef": "OpenStackMachineTemplate/pool-a"},
		check: func(t *testing.T, got client.Object) {
			testenv.Expect(t, "infrastructureRef", got.(*clusterv1.MachineSet).Spec.Template.Spec.InfrastructureRef,
				refTo(infraAPI, "OpenStackMachineTemplate", "pool-a"))
		},
	}, {
		name:   "Machine: infrastructureRef to its OpenStackMachine",
		obj:    testMachine("node-a"),
		params: map[string]string{"infrastructureRef": "OpenStackMachine/node-a"},
		check: func(t *testing.T, got client.Object) {
			testenv.Expect(t, "infrastructureRef", got.(*clusterv1.Machine).Spec.InfrastructureRef, refTo(infraAPI, "OpenStackMachine", "node-a"))
		},
	}, {
		name:   "KamajiControlPlane: kubelet.preferredAddressTypes",
		obj:    testKamaji("kamaji-cp"),
		params: map[string]string{"kubelet.preferredAddressTypes": "InternalIP,ExternalIP,Hostname"},
		check: func(t *testing.T, got client.Object) {
			v, _, _ := unstructured.NestedStringSlice(got.(*unstructured.Unstructured).Object, "spec", "kubelet", "preferredAddressTypes")
			testenv.Expect(t, "preferredAddressTypes", v, []string{"InternalIP", "ExternalIP", "Hostname"})
		},
	}, {
		name:    "a field the kind does not have is terminal",
		obj:     testMachine("no-cp-ref"),
		params:  map[string]string{"controlPlaneRef": "KubeadmControlPlane/x"},
		wantErr: "ferry does not patch controlPlaneRef of a Machine",
	}, {
		name:    "a reference to a kind ferry does not know is terminal",
		obj:     testMachine("bad-ref"),
		params:  map[string]string{"infrastructureRef": "DockerMachine/x"},
		wantErr: "kind DockerMachine is not one ferry references",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			mustCreate(t, k.Client, tc.obj)
			ev := event(step.Patch, kindOf(t, k, tc.obj), tc.obj.GetName(), tc.params)
			var versions []string
			for attempt := 1; attempt <= 2; attempt++ {
				run(t, e, ev, tc.wantErr)
				got := fresh(tc.obj)
				testenv.MustGet(t, k.Client, namespace, tc.obj.GetName(), got)
				versions = append(versions, got.GetResourceVersion())
				if tc.check != nil {
					tc.check(t, got)
				}
			}
			if versions[0] != versions[1] {
				t.Errorf("the second run wrote again (resourceVersion %s, then %s)", versions[0], versions[1])
			}
		})
	}
}

func testMachineSet(name, pool string) *clusterv1.MachineSet {
	sel := map[string]string{"pool": pool}
	return &clusterv1.MachineSet{ObjectMeta: testMeta(name), Spec: clusterv1.MachineSetSpec{
		ClusterName: cluster, Selector: metav1.LabelSelector{MatchLabels: sel},
		Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: sel}, Spec: testMachineSpec(cluster)},
	}}
}

// TestKubeDeletes: delete removes the named MachineDeployment of the
// plan's cluster when it carries the plan's mark, and nothing else; a
// missing one is already gone. The mark is prepare's label on an old
// pool, ferry's created-by label on a pool it created, or, on a pool
// prepared before ferry labelled old pools, ferry's pause, which
// becomes the label.
func TestKubeDeletes(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	mustCreate(t, k.Client,
		labelled(testMD("old-pool", cluster), observed.LabelReplacedBy, planName),
		labelled(testMD("new-pool", cluster), observed.LabelCreatedBy, planName),
		testMD("prepared-before-labels", cluster, ferryPause...),
		testMD("other-pool", cluster),
		labelled(testMD("other-plans-pool", cluster), observed.LabelReplacedBy, "another-plan"),
		labelled(testMD("foreign-pool", "another-cluster"), observed.LabelReplacedBy, planName))
	for _, tc := range []struct {
		name, md, wantErr string
		wantMessages      [2]string // of the first and second run
		wantLeft          []string
	}{{
		name: "a missing MachineDeployment is already gone", md: "never-there",
		wantMessages: [2]string{"already gone", "already gone"},
		wantLeft:     []string{"foreign-pool", "new-pool", "old-pool", "other-plans-pool", "other-pool", "prepared-before-labels"},
	}, {
		name: "the named old pool goes, its siblings stay", md: "old-pool",
		wantMessages: [2]string{"deleted MachineDeployment default/old-pool", "already gone"},
		wantLeft:     []string{"foreign-pool", "new-pool", "other-plans-pool", "other-pool", "prepared-before-labels"},
	}, {
		name: "a pool ferry created goes (a rollback of workers)", md: "new-pool",
		wantMessages: [2]string{"deleted MachineDeployment default/new-pool", "already gone"},
		wantLeft:     []string{"foreign-pool", "other-plans-pool", "other-pool", "prepared-before-labels"},
	}, {
		name: "an old pool ferry paused before it labelled old pools is labelled and goes", md: "prepared-before-labels",
		wantMessages: [2]string{"deleted MachineDeployment default/prepared-before-labels", "already gone"},
		wantLeft:     []string{"foreign-pool", "other-plans-pool", "other-pool"},
	}, {
		name: "a pool without the plan's mark is refused", md: "other-pool",
		wantErr:  "kubectl label -n default machinedeployment other-pool ferry.dev/replaced-by=capi-quickstart",
		wantLeft: []string{"foreign-pool", "other-plans-pool", "other-pool"},
	}, {
		name: "a pool another plan marked is refused", md: "other-plans-pool",
		wantErr: "has neither label ferry.dev/replaced-by=capi-quickstart", wantLeft: []string{"foreign-pool", "other-plans-pool", "other-pool"},
	}, {
		name: "one of another cluster is refused", md: "foreign-pool",
		wantErr: `belongs to cluster "another-cluster"`, wantLeft: []string{"foreign-pool", "other-plans-pool", "other-pool"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ev := event(step.Delete, step.MachineDeployment, tc.md, nil)
			for attempt := 1; attempt <= 2; attempt++ {
				rep := run(t, e, ev, tc.wantErr)
				if want := tc.wantMessages[attempt-1]; !strings.Contains(rep.Message, want) {
					t.Errorf("attempt %d: report %q; want it to say %q", attempt, rep.Message, want)
				}
			}
			var list clusterv1.MachineDeploymentList
			if err := k.Client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, md := range list.Items {
				left = append(left, md.Name)
			}
			testenv.Expect(t, "MachineDeployments left", left, tc.wantLeft)
		})
	}
	var md clusterv1.MachineDeployment
	testenv.MustGet(t, k.Client, namespace, "other-pool", &md)
	testenv.Expect(t, "labels of a refused pool", md.Labels, map[string]string(nil))
}

// TestKubeMarksOldPools: prepare's pause of an old pool labels it
// observed.LabelReplacedBy (cleanup deletes nothing without), also when
// the pool is paused already, and writes nothing the second time; the
// undo of prepare takes the label off with ferry's pause.
func TestKubeMarksOldPools(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	mustCreate(t, k.Client, testMD("running-pool", cluster), testMD("user-paused-pool", cluster, userPause...))
	label := observed.LabelReplacedBy + "=" + planName
	for _, tc := range []struct {
		md               string
		action           step.Action
		wantMessages     [2]string
		paused, labelled bool
	}{
		{"running-pool", step.Pause, [2]string{"paused MachineDeployment default/running-pool; labelled " + label, "already paused by ferry"}, true, true},
		{"user-paused-pool", step.Pause, [2]string{"not by ferry: the pause stays its owner's; labelled " + label, "not by ferry: the pause stays its owner's"}, true, true},
		{"running-pool", step.Unpause, [2]string{"unpaused MachineDeployment default/running-pool; label " + observed.LabelReplacedBy + " taken off", "is not paused"}, false, false},
	} {
		ev := event(tc.action, step.MachineDeployment, tc.md, nil)
		var rv string
		for attempt := 1; attempt <= 2; attempt++ {
			rep := run(t, e, ev, "")
			if want := tc.wantMessages[attempt-1]; !strings.Contains(rep.Message, want) || (attempt == 2 && strings.Contains(rep.Message, "labelled")) {
				t.Errorf("%s %s, attempt %d: report %q; want it to say %q", tc.action, tc.md, attempt, rep.Message, want)
			}
			var md clusterv1.MachineDeployment
			testenv.MustGet(t, k.Client, namespace, tc.md, &md)
			paused, _ := pauseState(&md)
			testenv.Expect(t, string(tc.action)+" "+tc.md+": paused", paused, tc.paused)
			testenv.Expect(t, string(tc.action)+" "+tc.md+": labelled", md.Labels[observed.LabelReplacedBy] == planName, tc.labelled)
			if attempt == 2 && md.ResourceVersion != rv {
				t.Errorf("%s %s: the second run wrote it", tc.action, tc.md)
			}
			rv = md.ResourceVersion
		}
	}
}

// labelled sets a label on an object a test starts from.
func labelled[O client.Object](obj O, key, value string) O {
	obj.SetLabels(map[string]string{key: value})
	return obj
}

// TestKubeRefusals: steps the executor cannot carry out fail terminally
// and change nothing.
func TestKubeRefusals(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	noCluster := event(step.Pause, step.Cluster, "c", nil)
	noCluster.Inputs = step.Inputs{}
	for _, tc := range []struct {
		name    string
		ev      *events.StepEvent
		wantErr string
		absent  client.Object // must not exist afterwards
	}{{
		name: "a Machine whose node has no Nova server",
		ev: event(step.Create, step.Machine, "orphan-node", map[string]string{
			"paused": "true", "infrastructureRef": "OpenStackMachine/orphan-node", "providerID": "lookup in Nova by node name"}),
		wantErr: "the Nova server of node orphan-node was not found",
		absent:  &clusterv1.Machine{ObjectMeta: testMeta("orphan-node")},
	}, {
		name: "an OpenStackMachine without a providerID",
		ev: event(step.Create, step.OpenStackMachine, "orphan-node", map[string]string{
			"flavor": "m1.large", "image": "ubuntu"}),
		wantErr: "was not found",
	}, {
		name:    "an action the kube executor does not have",
		ev:      event("explode", "Cluster", "c", nil),
		wantErr: `no action "explode" on kind "Cluster"`,
	}, {
		name:    "a wait on a kind nothing reports on",
		ev:      event(step.Wait, step.Machine, "m", nil),
		wantErr: `no action "wait" on kind "Machine"`,
	}, {
		name:    "a step without its cluster",
		ev:      noCluster,
		wantErr: "carries no cluster",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, e, tc.ev, tc.wantErr)
			if tc.absent != nil {
				err := k.Client.Get(context.Background(), client.ObjectKeyFromObject(tc.absent), tc.absent)
				if !apierrors.IsNotFound(err) {
					t.Errorf("%T %s exists after a refused step (err %v)", tc.absent, tc.absent.GetName(), err)
				}
			}
		})
	}
}

// TestKubeDeletesPausedPool: CAPI reconciles no paused MachineDeployment,
// its deletion included, so the old pool that ferry paused in prepare
// would stay half-deleted with its Machines. The delete lifts ferry's
// pause once the deletion has begun (a finalizer stands for CAPI's, which
// holds the object until its controller is done); a pool a person paused
// is refused, not deleted. A pause step does not pause it again while
// the deletion runs.
func TestKubeDeletesPausedPool(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	held := func(md *clusterv1.MachineDeployment) *clusterv1.MachineDeployment {
		md.Finalizers = []string{"test.ferry.dev/capi-holds-it"}
		return md
	}
	mustCreate(t, k.Client, held(testMD("ferry-paused", cluster, ferryPause...)), held(testMD("user-paused", cluster, userPause...)))

	ev := event(step.Delete, step.MachineDeployment, "ferry-paused", nil)
	for attempt := 1; attempt <= 2; attempt++ {
		if rep := run(t, e, ev, ""); !strings.Contains(rep.Message, "deleted MachineDeployment default/ferry-paused") {
			t.Errorf("attempt %d: report %q", attempt, rep.Message)
		}
	}
	var md clusterv1.MachineDeployment
	testenv.MustGet(t, k.Client, namespace, "ferry-paused", &md)
	testenv.Expect(t, "being deleted", md.DeletionTimestamp != nil, true)
	paused, mark := pauseState(&md)
	testenv.Expect(t, "paused or marked after the delete", paused || mark, false)
	// prepare's pause, planned again while the deletion runs, leaves it.
	if rep := run(t, e, event(step.Pause, step.MachineDeployment, "ferry-paused", nil), ""); !strings.Contains(rep.Message, "is being deleted") {
		t.Errorf("pause of a MachineDeployment being deleted: report %q", rep.Message)
	}
	testenv.MustGet(t, k.Client, namespace, "ferry-paused", &md)
	paused, _ = pauseState(&md)
	testenv.Expect(t, "paused again while being deleted", paused, false)

	run(t, e, event(step.Delete, step.MachineDeployment, "user-paused", nil), "paused, not by ferry")
	testenv.MustGet(t, k.Client, namespace, "user-paused", &md)
	testenv.Expect(t, "a person's paused pool being deleted", md.DeletionTimestamp != nil, false)
	paused, _ = pauseState(&md)
	testenv.Expect(t, "a person's pause kept", paused, true)
}
