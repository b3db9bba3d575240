package memlimit

import (
	"testing"
	"testing/fstest"
)

func TestCgroupMemoryLimit(t *testing.T) {
	files := []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}
	for _, tc := range []struct {
		name     string
		fsys     fstest.MapFS
		want     uint64
		wantFile string
		wantErr  bool
	}{
		{name: "v2 limit", fsys: fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("536870912\n")}},
			want: 512 << 20, wantFile: files[0]},
		{name: "v2 none", fsys: fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("max\n")}}, wantFile: files[0]},
		{name: "v1 limit", fsys: fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("314572800\n")}},
			want: 300 << 20, wantFile: files[1]},
		{name: "v1 none", fsys: fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")}},
			wantFile: files[1]},
		{name: "no cgroup files", fsys: fstest.MapFS{}},
		{name: "garbage", fsys: fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("lots")}}, wantFile: files[0], wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, file, err := cgroupMemoryLimit(tc.fsys, files)
			if got != tc.want || file != tc.wantFile || (err != nil) != tc.wantErr {
				t.Errorf("cgroupMemoryLimit = %d, %q, %v; want %d, %q, error %v", got, file, err, tc.want, tc.wantFile, tc.wantErr)
			}
		})
	}
}
