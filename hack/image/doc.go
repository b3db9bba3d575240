// Command image builds ferry's container image without a Docker daemon:
// one layer holding the static reconciler binary, CA certificates and a
// nonroot user, written as a tarball that `docker load`, `podman load`,
// `kind load image-archive` and `crane push` take. It is what ko does, with
// no base image to pull (this machine reaches no container registry):
//
//	go run ./hack/image --binary bin/linux/reconciler --tag ghcr.io/ferry-dev/reconciler:dev --out bin/reconciler-image.tar
//
// The image is reproducible: files and the config carry a fixed time
// (SOURCE_DATE_EPOCH when set).
//
// It imports no package of ferry's: it packs a binary that `make image`
// built, and nothing imports it.
package main
