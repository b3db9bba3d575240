package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the tests produce")

// Check compares got with the file at path. With -update it writes got
// there first, making the directories, so that the diff can be reviewed
// in Git. A difference or a missing file fails t, saying how to rewrite.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the test produced (go test -run %s -update rewrites it; review the diff)\n%s\nwhole output:\n%s",
			path, t.Name(), firstDiff(string(want), string(got)), got)
	}
}

// firstDiff names the first line in which got differs from want.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + a + "\n  got:  " + b
		}
	}
	return "(no line differs)"
}

// CheckSection is Check for a generated section of a document: the text
// between the lines `<!-- begin name -->` and `<!-- end name -->` of the
// file at path must be got. With -update it rewrites that section only.
func CheckSection(t testing.TB, path, name string, got []byte) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := []byte("<!-- begin "+name+" -->\n"), []byte("<!-- end "+name+" -->")
	i, j := bytes.Index(doc, begin), bytes.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no section between %q and %q", path, begin, end)
	}
	i += len(begin)
	if *update {
		out := append(append(append([]byte{}, doc[:i]...), got...), doc[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := doc[i:j]; !bytes.Equal(got, want) {
		t.Errorf("%s: section %s differs from what the test produced (go test -run %s -update rewrites it; review the diff)\n%s",
			path, name, t.Name(), firstDiff(string(want), string(got)))
	}
}
