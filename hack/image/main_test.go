package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
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

// TestImage builds the image of the real reconciler with this program,
// built and run as make image runs it, reads the tarball back as `docker
// load` would, and runs the binary it holds: the image is complete, runs
// as nonroot, and is the same bytes when built twice. (The program runs
// apart, not built for the race detector: under it, compressing the
// layer twice took most of the test's 80 s of CPU.)
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin, image := filepath.Join(dir, "reconciler"), filepath.Join(dir, "image")
	for _, b := range [][2]string{{bin, "../../cmd/reconciler"}, {image, "."}} {
		gobuild := exec.Command("go", "build", "-trimpath", "-o", b[0], b[1])
		gobuild.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := gobuild.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	const tag = "ghcr.io/ferry-dev/reconciler:dev"
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func(out string) {
		t.Helper()
		cmd := exec.Command(image, "--binary", bin, "--tag", tag, "--out", out, "--arch", "amd64", "--version", "v0.0.0-test")
		cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", when.Unix()))
		if text, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("image: %v\n%s", err, text)
		}
	}
	out := filepath.Join(dir, "image.tar")
	build(out)

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

	// Built again: the same bytes.
	again := filepath.Join(dir, "again.tar")
	build(again)
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("two builds differ: %d and %d bytes, sha256 %x and %x", len(first), len(second), sha256.Sum256(first), sha256.Sum256(second))
	}
}
