package testenv

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// An API server's first start is mostly work that comes out the same
// every time: its bootstrap (the default RBAC roles, priority levels,
// namespaces) and the creation of the 29 CRDs, each written, checked,
// given managed fields and updated by the naming and establishing
// controllers: about 10 s of CPU a start (etcd, kube-apiserver and the
// test's client together), where a start on an etcd that holds it all
// already takes about 6. So the first StartKube on a machine makes such an
// etcd data directory (etcdTemplate) and every StartKube starts etcd on
// a copy of it: what the API server then finds is what it would have
// made itself, with the CRDs established.

// etcdTemplateFormat changes when what a template holds changes.
const etcdTemplateFormat = "1"

// etcdTemplate returns the etcd data directory of an API server of bin's
// that bootstrapped and created crds, then stopped: made once per machine
// (and per binaries and CRDs) under the user's cache directory, by one
// process at a time.
func etcdTemplate(t T, bin string, crds []*apiextensionsv1.CustomResourceDefinition) (string, error) {
	t.Helper()
	key, err := etcdTemplateKey(bin, crds)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "ferry", "envtest", key)
	data := filepath.Join(dir, "etcd")
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return data, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return data, nil // another process made it meanwhile
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	start := time.Now()
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDInstallOptions:        envtest.CRDInstallOptions{CRDs: deepCopies(crds)},
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: data}
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		return "", fmt.Errorf("etcd template: start an API server: %w", err)
	}
	if err := env.Stop(); err != nil { // etcd ends cleanly: nothing half written
		return "", fmt.Errorf("etcd template: stop the API server: %w", err)
	}
	syscall.Sync()
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o600); err != nil {
		return "", err
	}
	t.Logf("testenv: made the etcd template %s (an API server's bootstrap and %d CRDs) in %s", dir, len(crds), time.Since(start).Round(time.Millisecond))
	return data, nil
}

// etcdTemplateKeys are the keys this process computed, by bin: hashing
// the CRDs takes about 40 ms, several times that in a test binary built
// for the race detector, and they do not change within a process.
var etcdTemplateKeys sync.Map

// etcdTemplateKey names a template by what makes it: the format, the
// etcd and kube-apiserver binaries (path, size, modification time) and
// the CRDs (parsedCRDs', the same for a whole process).
func etcdTemplateKey(bin string, crds []*apiextensionsv1.CustomResourceDefinition) (string, error) {
	if key, ok := etcdTemplateKeys.Load(bin); ok {
		return key.(string), nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "format %s\n", etcdTemplateFormat)
	for _, name := range []string{"etcd", "kube-apiserver"} {
		p := filepath.Join(bin, name)
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\n", p, fi.Size(), fi.ModTime().UnixNano())
	}
	if err := json.NewEncoder(h).Encode(crds); err != nil {
		return "", err
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	etcdTemplateKeys.Store(bin, key)
	return key, nil
}

// deepCopies are fresh copies of crds: envtest writes server-set fields
// into the objects it creates.
func deepCopies(crds []*apiextensionsv1.CustomResourceDefinition) []*apiextensionsv1.CustomResourceDefinition {
	copies := make([]*apiextensionsv1.CustomResourceDefinition, len(crds))
	for i, crd := range crds {
		copies[i] = crd.DeepCopy()
	}
	return copies
}

// copyEtcdData copies an etcd data directory from src to dst, which must
// not exist: directories 0700 as etcd wants them, and files sparse, since
// most of a write-ahead log is preallocated zeros (64 MB a segment). The
// next segment etcd prepared (*.tmp) is left out; etcd makes it again.
func copyEtcdData(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o700)
		case strings.HasSuffix(d.Name(), ".tmp") || !d.Type().IsRegular():
			return nil
		}
		return copySparse(path, target)
	})
}

// copySparse copies file src to dst, skipping over blocks of zeros.
func copySparse(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	buf := make([]byte, 1<<20)
	zeros := make([]byte, len(buf))
	var size int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zeros[:n]) {
				if _, err := out.Seek(int64(n), io.SeekCurrent); err != nil {
					return err
				}
			} else if _, err := out.Write(buf[:n]); err != nil {
				return err
			}
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			return out.Truncate(size)
		}
		if rerr != nil {
			return rerr
		}
	}
}
