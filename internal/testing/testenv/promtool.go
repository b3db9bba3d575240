package testenv

import (
	"os"
	"path/filepath"
)

// Promtool returns the path of promtool, Prometheus's rule checker and
// rule unit-test runner, built by `make tools` from the version pinned in
// hack/tools/prometheus: in $FERRY_PROMTOOL_DIR when set (the Makefile
// sets it), otherwise in the directory `hack/tools.sh --promtool-dir`
// prints. When it is missing t fails and says to run `make tools`.
func Promtool(t T) string {
	t.Helper()
	dir, err := toolsScriptDir("FERRY_PROMTOOL_DIR", "--promtool-dir")
	if err != nil {
		t.Fatalf("testenv: find promtool: %v", err)
	}
	bin := filepath.Join(dir, "promtool")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("testenv: promtool not found in %s: run `make tools` (`make test` builds it when missing)", dir)
	}
	return bin
}
