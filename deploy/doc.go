// Package deploy holds the manifests that install ferry's reconciler into
// a management cluster (Kustomize: the base, the Role every namespace of
// clusters to migrate needs, the overlays; README.md says which is which),
// and no Go code: doc.go is here for this comment.
//
// Its tests (package deploy_test) check the manifests against a real API
// server: they are accepted, they wire flags the binary has, and the
// service account's RBAC and admission policy allow what a migration needs
// and nothing beyond, asked of the API server (access reviews) and tried
// as the service account (access_test.go). The NetworkPolicy is checked
// against the Deployment and Service it guards (enforcing it is a network
// plugin's, which the test API server has none of). The clustered overlay
// is checked for the layout it promises (cluster_test.go). (cmd/reconciler's
// run tests go further: they run migrations as this service account.)
//
// The package imports nothing; its tests may use internal/testing.
package deploy
