// Command demo is `make demo`: it shows ferry migrate a cluster onto
// OpenStack end to end, with everything on this machine, and acts as the
// team would on their forge: a real Gitea by default (--forge gitea), or
// the GitHub stand-in (--forge github). --scenario chooses the cluster: adopt (seed 000,
// the default and what follows describes), replace (seed 003 with a seed
// 002 gateway: scenario.go, replace.go), kamaji (seed 004), or one of the
// rollbacks: rollback (seed 000 migrated up to each phase in turn and
// rolled back to none, the world compared with how it was before the
// first pull request each time, then adopted again and checked as adopt
// is: rollback.go, rollback_cycles.go), rollback-kamaji (seed 004 adopted
// and rolled back, compared the same way) and rollback-replace (seed 003
// moved up to the cutover, then rolled back to infrastructure under the
// cutover's promises: rollback_replace.go).
//
// It starts a management and a workload API server (the test environment's
// kube-apiserver and etcd) with a cluster prepared the way seed 000's
// scripts find it, a project with servers named like the nodes in the local
// OpenStack (hack/openstack-up.sh must be running: `make demo` starts it),
// the real Cluster API (core, kubeadm bootstrap, KubeadmControlPlane) and
// CAPO managers (`make tools` builds them), and the forge with the plans
// repository (forge.go): a real Gitea (`make tools` builds it too), where
// ferry's account is the admin "ferry", alice pushes a branch and opens
// each pull request, bob merges it through Gitea's API (the merge styles in
// turn: a merge commit, squash, rebase) and Gitea delivers signed webhooks;
// or, with --forge github, a plain Git server with the GitHub stand-in
// (internal/testing/fakegithub, not GitHub), whose webhooks the demo
// delivers. ferry's processes reach the repository, and Gitea's API, through
// a fault proxy. It then runs `reconciler run` (the real binary,
// unchanged) against all of them, and for each phase opens a pull request,
// prints ferry's preview comment, merges, waits for the phase and prints
// the progress comment, read back from the forge. It ends with `reconciler
// status`, the status commits and the checks of what the real controllers
// made of the adopted cluster (the same servers, every Machine Running,
// nothing rolled out, no certificate regenerated, no stray port), and exits
// 0 only when the migration finished and every check holds. Everything it
// started stops when it ends, also on Ctrl-C.
//
// It is a tool of this repository, not part of what ferry ships: it may
// import internal/testing (the test backends, the local cloud's fixtures,
// the GitHub stand-in), and nothing imports it. ferry runs as the real,
// unchanged binary; the demo acts on it as a team would, through the forge
// and Git, and reads back what ferry wrote (the statuses, the Events, the
// comments) with ferry's own packages.
package main
