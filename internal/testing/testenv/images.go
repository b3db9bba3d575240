package testenv

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images of internal/testing/testapp that real nodes import
// (TestImages): the pod sandbox's, which containerd starts first in every
// pod, and the test application's. No registry is involved: the nodes
// import the tarballs, and pods name them with imagePullPolicy Never.
const (
	PauseImage   = "ferry.local/pause:test"
	TestAppImage = "ferry.local/testapp:test"
)

// TestImages builds testapp (static, for this machine's architecture) and
// writes PauseImage and TestAppImage as image tarballs in a directory of
// t's, and returns their paths. (A build of the process's, kept for later
// calls, would be left in the machine's temporary directory when the
// process ends.)
func TestImages(t T) []string {
	t.Helper()
	paths, err := buildTestImages(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: test images: %v", err)
	}
	return paths
}

func buildTestImages(dir string) ([]string, error) {
	bin := filepath.Join(dir, "testapp")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/ferry-dev/ferry/internal/testing/testapp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build testapp: %w\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, img := range []struct {
		tag        string
		entrypoint []string
	}{
		{PauseImage, []string{"/testapp", "pause"}},
		{TestAppImage, []string{"/testapp"}},
	} {
		path := filepath.Join(dir, filepath.Base(img.tag[:len(img.tag)-len(":test")])+".tar")
		if err := WriteImage(path, img.tag, "testapp", data, img.entrypoint); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.tag, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// WriteImage writes an image tarball tagged tag whose one layer holds
// binary at /<file> (and an empty /tmp), with entrypoint, as `docker
// save` would write it.
func WriteImage(path, tag, file string, binary []byte, entrypoint []string) error {
	when := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: when}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: file, Mode: 0o755, Size: int64(len(binary)), ModTime: when}); err != nil {
		return err
	}
	if _, err := tw.Write(binary); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerTar := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: when}, CreatedBy: "testenv.WriteImage"}})
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = runtime.GOARCH, "linux", v1.Time{Time: when}
	cfg.Config = v1.Config{Entrypoint: entrypoint, Env: []string{"PATH=/"}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(path, ref, img)
}
