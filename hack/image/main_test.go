package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the image of the real reconciler, reads the tarball
// back as `docker load` would, and runs the binary it holds: the image is
// complete, runs as nonroot, and is the same bytes when built twice.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "reconciler")
	gobuild := exec.Command("go", "build", "-trimpath", "-o", bin, "../../cmd/reconciler")
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const tag = "ghcr.io/ferry-dev/reconciler:dev"
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := filepath.Join(dir, "image.tar")
	if err := build(bin, CAPath, tag, out, "amd64", "v0.0.0-test", when); err != nil {
		t.Fatal(err)
	}

	ref, _ := name.NewTag(tag)
	img, err := tarball.ImageFromPath(out, &ref)
	if err != nil {
		t.Fatalf("read the tarball back: %v", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != BinaryPath || cfg.Config.User != "65532:65532" || cfg.OS != "linux" || !cfg.Created.Time.Equal(when) {
		t.Errorf("config: entrypoint %v, user %q, os %q, created %v", got, cfg.Config.User, cfg.OS, cfg.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	extracted := filepath.Join(dir, "extracted-reconciler")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if "/"+h.Name == BinaryPath {
			f, err := os.OpenFile(extracted, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	for _, p := range []string{BinaryPath, CAPath, "/etc/passwd", DataDir + "/", "/tmp/"} {
		if files[p[1:]] == nil {
			t.Errorf("the image lacks %s", p)
		}
	}
	if h := files[BinaryPath[1:]]; h != nil && h.Mode&0o111 == 0 {
		t.Errorf("%s is not executable: %o", BinaryPath, h.Mode)
	}
	if h := files[DataDir[1:]+"/"]; h != nil && h.Uid != UID {
		t.Errorf("%s belongs to %d; want %d", DataDir, h.Uid, UID)
	}
	version, err := exec.Command(extracted, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(version), "ferry reconciler") {
		t.Errorf("the image's binary does not run: %v\n%s", err, version)
	}

	// Built again: the same image.
	again := filepath.Join(dir, "again.tar")
	if err := build(bin, CAPath, tag, again, "amd64", "v0.0.0-test", when); err != nil {
		t.Fatal(err)
	}
	img2, err := tarball.ImageFromPath(again, &ref)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s and %s", d1, d2)
	}
}
