package planfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds Decode arbitrary bytes. Plans come from pull requests,
// so the decoder must never panic; its errors must say where they are; and
// a plan it accepts must survive being written out and read back, which is
// what the reconciler does with it (status, PR comments).
//
// `make fuzz` runs it; `go test` runs the seed corpus.
func FuzzDecode(f *testing.F) {
	examples, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(examples) == 0 {
		f.Fatalf("no example plans in %s: %v", examplesDir, err)
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{
		replacePlan,
		kamajiPlan,
		"",
		"---\n---\n",
		"{",
		"\t- a",
		"null",
		"[]",
		"apiVersion: [",
		"a: &x [1]\nb: *x\n",
		"a: &a [*a]\n",
		"<<: {kind: MigrationPlan}\n",
		"kind: MigrationPlan\nkind: MigrationPlan\n",
		"spec: {target: {workers: [{replicas: 99999999999999999999}, {replicas: 0x10}]}}\n",
		"spec: {target: {workers: {name: md-0}}}\n",
		"spec:\n  manifests:\n    cloudControllerManager:\n      nodeSelector: {[a]: b, c: [d]}\n",
		"? [a]\n: b\n",
		"metadata: {name: !!binary aGVsbG8=}\n",
		"apiVersion: ferry.dev/v1alpha1\r\nkind: MigrationPlan\r\n",
		"\xef\xbb\xbfkind: MigrationPlan\n",
		"kind: \"\xff\"\n",
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "plans/fuzz.yaml"
		file, err := Decode(path, data)
		if err != nil {
			if file != nil {
				t.Fatal("Decode returned a plan and an error")
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Decode error %v (%T); want a non-empty planfile.Errors", err, err)
			}
			// An error at the end of the stream is on the line after
			// the last one.
			lines := lineBreaks(data) + 2
			for _, e := range es {
				if e.File != path || e.Msg == "" || e.Line < 0 || e.Line > lines {
					t.Errorf("error %#v: want File %q, a message and a line in 0..%d", e, path, lines)
				}
			}
			return
		}
		if file == nil || file.Plan == nil || file.Path != path {
			t.Fatalf("Decode returned %+v and no error", file)
		}
		encoded, err := json.Marshal(file.Plan)
		if err != nil {
			t.Fatalf("a decoded plan does not encode to JSON: %v", err)
		}

		// JSON is YAML: the encoded, defaulted plan decodes to itself.
		if len(encoded) > MaxSize {
			return
		}
		again, err := Decode("plans/fuzz.json", encoded)
		if err != nil {
			t.Fatalf("the plan written out as JSON does not decode:\n%s\n%v", encoded, err)
		}
		reencoded, err := json.Marshal(again.Plan)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encoded, reencoded) {
			t.Fatalf("decoding the plan's JSON changed it:\n%s\n%s", encoded, reencoded)
		}
	})
}

// lineBreaks counts what YAML takes for a line break: \n, \r (so \r\n
// counts twice, which only loosens the bound), NEL, LS and PS.
func lineBreaks(data []byte) int {
	n := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r"))
	for _, r := range []string{"\u0085", "\u2028", "\u2029"} {
		n += bytes.Count(data, []byte(r))
	}
	return n
}
