package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	BinaryPath = "/usr/local/bin/reconciler"
	CAPath     = "/etc/ssl/certs/ca-certificates.crt"
	DataDir    = "/var/lib/ferry"
	UID        = 65532
)

func main() {
	binary := flag.String("binary", "", "the reconciler binary, built static for linux (CGO_ENABLED=0 GOOS=linux)")
	tag := flag.String("tag", "ghcr.io/ferry-dev/reconciler:dev", "image reference the tarball names")
	out := flag.String("out", "bin/reconciler-image.tar", "tarball to write")
	ca := flag.String("ca", CAPath, "CA bundle to include (Debian's ca-certificates)")
	arch := flag.String("arch", runtime.GOARCH, "architecture the binary was built for")
	version := flag.String("version", "dev", "version label")
	flag.Parse()
	if *binary == "" {
		fmt.Fprintln(os.Stderr, "image: --binary is required")
		os.Exit(2)
	}
	if err := build(*binary, *ca, *tag, *out, *arch, *version, sourceDate()); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%s); load it with `docker load -i %s`\n", *out, *tag, *out)
}

// sourceDate is SOURCE_DATE_EPOCH, or 2000-01-01 when unset.
func sourceDate() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
}

// build writes the image of binary (with the CA bundle at caFile) to out,
// tagged tag.
func build(binary, caFile, tag, out, arch, version string, when time.Time) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("--tag %q: %w", tag, err)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return fmt.Errorf("%s is not a Linux (ELF) binary: build it with GOOS=linux CGO_ENABLED=0", binary)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("CA bundle: %w (apt-get install ca-certificates)", err)
	}
	layerTar, err := layer(bin, ca, when)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: l, History: v1.History{Created: v1.Time{Time: when}, CreatedBy: "hack/image", Comment: "reconciler " + version},
	})
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = arch, "linux", v1.Time{Time: when}
	cfg.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		User:       fmt.Sprintf("%d:%d", UID, UID),
		WorkingDir: DataDir,
		Env:        []string{"PATH=/usr/local/bin", "HOME=" + DataDir, "SSL_CERT_FILE=" + CAPath},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "ferry reconciler",
			"org.opencontainers.image.source":  "https://github.com/ferry-dev/ferry",
			"org.opencontainers.image.version": version,
		},
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// layer is the image's one layer: the binary, the CA bundle, /etc/passwd
// and /etc/group with the nonroot user, and its data and temp directories.
func layer(bin, ca []byte, when time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(path string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path, Mode: mode, Uid: uid, Gid: uid, ModTime: when})
	}
	file := func(path string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: when}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, UID, DataDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
	steps := []func() error{
		func() error { return dir("etc/", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("etc/ssl/", 0o755, 0) },
		func() error { return dir("etc/ssl/certs/", 0o755, 0) },
		func() error { return file(CAPath[1:], 0o644, ca) },
		func() error { return dir("tmp/", 0o1777, 0) },
		func() error { return dir("usr/", 0o755, 0) },
		func() error { return dir("usr/local/", 0o755, 0) },
		func() error { return dir("usr/local/bin/", 0o755, 0) },
		func() error { return file(BinaryPath[1:], 0o755, bin) },
		func() error { return dir("var/", 0o755, 0) },
		func() error { return dir("var/lib/", 0o755, 0) },
		func() error { return dir(DataDir[1:]+"/", 0o755, UID) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
