package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/testing/golden"

	"gopkg.in/yaml.v3"
)

// The checked-in schema is this package's golden file: a change to the Go
// types that is not regenerated fails here as well as in `make verify`.
func TestSchemaUpToDate(t *testing.T) {
	root := testRoot(t)
	got, err := Generate(filepath.Join(root, typesDir))
	if err != nil {
		t.Fatal(err)
	}
	// `make generate` rewrites it too.
	golden.Check(t, filepath.Join(root, schemaPath), got)
	again, err := Generate(filepath.Join(root, typesDir))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, again) {
		t.Error("two runs of Generate differ; the output must be deterministic")
	}
	if !bytes.HasSuffix(got, []byte("}\n")) || bytes.Contains(got, []byte(`\u003c`)) {
		t.Error("schema must end in a newline and keep < > & unescaped in descriptions")
	}
}

func TestCheck(t *testing.T) {
	current, err := Generate(filepath.Join(testRoot(t), typesDir))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name     string
		content  []byte // nil: no file
		wantCode int
		wantErr  string
	}{
		{name: "up to date", content: current, wantCode: 0},
		{name: "stale", content: bytes.Replace(current, []byte("Octavia"), []byte("Neutron"), 1), wantCode: 1, wantErr: "is out of date with the Go types in api/v1alpha1; run `make generate`"},
		{name: "missing", wantCode: 1, wantErr: "does not exist; run `make generate`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if tt.content != nil {
				if err := os.WriteFile(out, tt.content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"-check", "-o", out}, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.wantCode, stderr.String())
			}
			if tt.wantErr != "" && !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.wantErr)
			}
			if _, err := os.Stat(out); tt.content == nil && err == nil {
				t.Error("-check wrote the file")
			}
		})
	}

	// Without -check the file is written, and -check then agrees.
	out := filepath.Join(dir, "written.json")
	var stderr bytes.Buffer
	if code := run([]string{"-o", out}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"-check", "-o", out}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Errorf("-check after generate: exit %d: %s", code, stderr.String())
	}
}

// A field without a doc comment would become a property without a
// description; the generator refuses rather than writing one.
func TestGenerateNeedsDocComments(t *testing.T) {
	src := filepath.Join(testRoot(t), typesDir)
	tests := []struct {
		name, remove, wantErr string
	}{
		{
			name:    "field",
			remove:  "\t// Replicas is the number of machines.\n",
			wantErr: "field WorkerPool.Replicas has no doc comment",
		},
		{
			name:    "type",
			remove:  "// SSHKey is a Nova keypair.\n",
			wantErr: "type SSHKey has no doc comment",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			entries, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			removed := false
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), ".go") {
					continue
				}
				data, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(data, []byte(tt.remove)) {
					data = bytes.Replace(data, []byte(tt.remove), nil, 1)
					removed = true
				}
				if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if !removed {
				t.Fatalf("no file in %s has %q; update the test", src, tt.remove)
			}
			_, err = Generate(dir)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Generate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// The schema is only useful if it accepts the plans the decoder accepts and
// rejects what the decoder rejects, as far as field rules go.
func TestSchemaAgreesWithPlans(t *testing.T) {
	root := testRoot(t)
	data, err := Generate(filepath.Join(root, typesDir))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join(root, "plans", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example plans in %s: %v", root, err)
	}
	for _, path := range examples {
		t.Run(filepath.Base(path), func(t *testing.T) {
			plan := readYAML(t, path)
			if problems := validate(schema, schema, plan, ""); len(problems) > 0 {
				t.Errorf("the schema rejects an example plan:\n%s", strings.Join(problems, "\n"))
			}
		})
	}

	base, err := os.ReadFile(filepath.Join(root, "plans", "vsphere-workers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new, want string
	}{
		{"unknown field", "  strategy: replace\n", "  strategy: replace\n  stratgey: adopt\n", "spec: unknown property stratgey"}, //nolint:misspell // a misspelt field on purpose
		{"enum", "strategy: replace", "strategy: migrate", "spec.strategy: not one of"},
		{"empty enum is allowed only where the tag allows it", "provider: KubeadmControlPlane", `provider: ""`, "spec.target.controlPlane.provider: shorter than 1"},
		{"min", "replicas: 3", "replicas: 0", "spec.target.workers[0].replicas: 0 is less than 1"},
		{"integer", "replicas: 3", "replicas: three", "spec.target.workers[0].replicas: want integer"},
		{"subdomain", "name: vsphere-workers\nspec:", "name: Vsphere_Workers\nspec:", "metadata.name: does not match"},
		{"label", "namespace: tenants", "namespace: ten.ants", "spec.cluster.namespace: does not match"},
		{"duration", "drainTimeout: 15m", "drainTimeout: 15 minutes", "spec.cutover.drainTimeout: does not match"},
		{"url", "probeURL: https://", "probeURL: ftp://", "spec.cutover.probeURL: does not match"},
		{"required", "    sshKey:\n      name: tenants-key\n", "    sshKey: {}\n", "spec.target.sshKey: missing required name"},
		{"required list empty", "[vsphere-workers-md-0]", "[]", "spec.replace.oldMachineDeployments: fewer than 1 items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if bytes.Count(base, []byte(tt.old)) != 1 {
				t.Fatalf("%q is not in the example exactly once; update the test", tt.old)
			}
			var plan any
			if err := yaml.Unmarshal(bytes.Replace(base, []byte(tt.old), []byte(tt.new), 1), &plan); err != nil {
				t.Fatal(err)
			}
			problems := validate(schema, schema, plan, "")
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, tt.want) }) {
				t.Errorf("schema problems %q, want one starting %q", problems, tt.want)
			}
		})
	}
}

func readYAML(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// validate checks v against s, for the keywords the generator writes; a
// keyword it does not know fails, so that this keeps up with the generator.
func validate(root, s map[string]any, v any, path string) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, strings.TrimPrefix(path+": ", ": ")+fmt.Sprintf(format, args...))
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kw := s[k]
		switch k {
		case "$schema", "$id", "$defs", "title", "description", "format", "properties":
			// Annotations, or read with another keyword.
		case "$ref":
			name := strings.TrimPrefix(kw.(string), "#/$defs/")
			def := root["$defs"].(map[string]any)[name].(map[string]any)
			problems = append(problems, validate(root, def, v, path)...)
		case "type":
			if got := jsonType(v); got != kw {
				bad("want %s, got %s", kw, got)
				return problems
			}
		case "enum":
			if !slices.Contains(kw.([]any), v) {
				bad("not one of %v", kw)
			}
		case "const":
			if v != kw {
				bad("not %v", kw)
			}
		case "anyOf":
			ok := false
			for _, sub := range kw.([]any) {
				ok = ok || len(validate(root, sub.(map[string]any), v, path)) == 0
			}
			if !ok {
				bad("matches none of anyOf %v", kw)
			}
		case "pattern":
			if str, ok := v.(string); ok && !regexp.MustCompile(kw.(string)).MatchString(str) {
				bad("does not match %s", kw)
			}
		case "minLength", "maxLength":
			if str, ok := v.(string); ok {
				n, limit := len([]rune(str)), int(kw.(float64))
				if k == "minLength" && n < limit {
					bad("shorter than %d", limit)
				} else if k == "maxLength" && n > limit {
					bad("longer than %d", limit)
				}
			}
		case "minimum":
			if n, ok := v.(int); ok && float64(n) < kw.(float64) {
				bad("%d is less than %v", n, kw)
			}
		case "minItems":
			if l, ok := v.([]any); ok && float64(len(l)) < kw.(float64) {
				bad("fewer than %v items", kw)
			}
		case "minProperties":
			if m, ok := v.(map[string]any); ok && float64(len(m)) < kw.(float64) {
				bad("fewer than %v properties", kw)
			}
		case "items":
			for i, item := range v.([]any) {
				problems = append(problems, validate(root, kw.(map[string]any), item, fmt.Sprintf("%s[%d]", path, i))...)
			}
		case "required":
			for _, name := range kw.([]any) {
				if _, ok := v.(map[string]any)[name.(string)]; !ok {
					bad("missing required %s", name)
				}
			}
		case "additionalProperties":
			props, _ := s["properties"].(map[string]any)
			m := v.(map[string]any)
			names := make([]string, 0, len(m))
			for name := range m {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				p := strings.TrimPrefix(path+"."+name, ".")
				if sub, ok := props[name]; ok {
					problems = append(problems, validate(root, sub.(map[string]any), m[name], p)...)
				} else if extra, ok := kw.(map[string]any); ok {
					problems = append(problems, validate(root, extra, m[name], p)...)
				} else {
					bad("unknown property %s", name)
				}
			}
		default:
			bad("the test's validator does not know keyword %q; teach it", k)
		}
	}
	return problems
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case int:
		return "integer"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func testRoot(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
