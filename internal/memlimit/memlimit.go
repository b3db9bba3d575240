package memlimit

import (
	"errors"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Share is the part of a container's memory limit the Go
// runtime aims to stay under: it collects garbage harder as its memory
// nears it. The rest is for what the runtime does not count: mostly the
// pages of the binary the kernel has read (about 50 MiB of the 70 MiB
// static binary at 1,000 plans), which a container's memory counts too.
const Share = 0.8

// cgroupMemoryFiles hold a container's memory limit: cgroup v2's, then
// v1's as container runtimes mount it.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Set gives the Go runtime a soft memory limit of Share of the
// container's, when GOMEMLIMIT does not set one,
// so that a fleet's migration in a container sized for it collects
// garbage more often instead of being killed. It logs what it set.
func Set(log *slog.Logger) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return
	}
	limit, file, err := cgroupMemoryLimit(os.DirFS("/"), cgroupMemoryFiles)
	if err != nil {
		log.Warn("container memory limit not read; the Go runtime has none", "file", file, "error", err)
		return
	}
	if limit == 0 {
		return
	}
	soft := Of(int64(limit))
	debug.SetMemoryLimit(soft)
	log.Info("memory limit set from the container's", "container_bytes", limit, "soft_limit_bytes", soft, "file", file)
}

// Of is the soft limit for a container limit of n bytes: Share of it.
func Of(n int64) int64 { return int64(float64(n) * Share) }

// cgroupMemoryLimit reads the first of files that exists (paths in fsys,
// which is rooted at /): the limit in bytes, or 0 when there is no limit.
func cgroupMemoryLimit(fsys fs.FS, files []string) (limit uint64, file string, err error) {
	for _, f := range files {
		data, err := fs.ReadFile(fsys, strings.TrimPrefix(f, "/"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, f, err
		}
		v := strings.TrimSpace(string(data))
		if v == "max" {
			return 0, f, nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, f, errors.New("not a number of bytes: " + strconv.Quote(v))
		}
		// cgroup v1 says "no limit" with a number near the largest
		// int64, rounded down to a page.
		if n >= math.MaxInt64/2 {
			return 0, f, nil
		}
		return n, f, nil
	}
	return 0, "", nil
}
