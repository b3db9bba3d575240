package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

const (
	// modulePath identifies the repository root when walking up from the
	// working directory.
	modulePath = "github.com/ferry-dev/ferry"
	// typesDir holds the Go types, relative to the module root.
	typesDir = "api/v1alpha1"
	// schemaPath is the generated file, relative to the module root.
	schemaPath = "api/v1alpha1/migrationplan.schema.json"
	// schemaID is where the schema is served from, so that a plan can name
	// it in a `# yaml-language-server: $schema=` comment.
	schemaID = "https://raw.githubusercontent.com/ferry-dev/ferry/main/" + schemaPath
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("schemagen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the schema to `path` (default: "+schemaPath+" in the module)")
	check := fs.Bool("check", false, "write nothing; exit 1 if the file differs from what would be generated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "schemagen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(stderr, "schemagen: %v\n", err)
		return 2
	}
	if *out == "" {
		*out = filepath.Join(root, schemaPath)
	}
	want, err := Generate(filepath.Join(root, typesDir))
	if err != nil {
		fmt.Fprintf(stderr, "schemagen: %v\n", err)
		return 2
	}
	if *check {
		got, err := os.ReadFile(*out)
		switch {
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(stderr, "schemagen: %s does not exist; run `make generate` and commit it\n", *out)
			return 1
		case err != nil:
			fmt.Fprintf(stderr, "schemagen: %v\n", err)
			return 2
		case !bytes.Equal(got, want):
			fmt.Fprintf(stderr, "schemagen: %s is out of date with the Go types in %s; run `make generate` and commit the result\n", *out, typesDir)
			return 1
		}
		fmt.Fprintf(stdout, "%s is up to date\n", *out)
		return 0
	}
	if err := os.WriteFile(*out, want, 0o644); err != nil {
		fmt.Fprintf(stderr, "schemagen: %v\n", err)
		return 2
	}
	return 0
}

// moduleRoot walks up from the working directory to ferry's go.mod, so
// that the command works from any directory in the repository.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modfileModule(data) == modulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find module root: no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// modfileModule returns the module path a go.mod declares.
func modfileModule(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Generate returns the schema of v1alpha1.MigrationPlan, with descriptions
// from the doc comments of the Go source in dir. It fails when a type or
// field that is part of the format has no doc comment, or when a `ferry`
// rule does not fit its field's type: both would give a schema that says
// less than the decoder checks.
func Generate(dir string) ([]byte, error) {
	docs, err := readDocs(dir)
	if err != nil {
		return nil, err
	}
	g := &generator{docs: docs, defs: map[string]any{}}
	root := reflect.TypeFor[v1alpha1.MigrationPlan]()
	schema, err := g.object(root)
	if err != nil {
		return nil, err
	}
	schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	schema["$id"] = schemaID
	schema["title"] = fmt.Sprintf("ferry %s (%s)", v1alpha1.Kind, v1alpha1.APIVersion)
	schema["$defs"] = g.defs

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Descriptions say <cluster>-cloud-config; \u003c would be unreadable
	// to whoever reviews the generated file.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	// encoding/json sorts map keys, which makes the output deterministic.
	if err := enc.Encode(schema); err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return buf.Bytes(), nil
}

// typeDocs are the rendered doc comments of one Go type and its fields.
type typeDocs struct {
	doc    string
	fields map[string]string
}

// readDocs parses the non-test Go files in dir and returns the doc comments
// of every type and struct field, rendered as plain text paragraphs.
func readDocs(dir string) (map[string]typeDocs, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read Go types: %w", err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse Go types: %w", err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("read Go types: no Go files in %s", dir)
	}
	pkg, err := doc.NewFromFiles(fset, files, modulePath+"/"+typesDir, doc.PreserveAST)
	if err != nil {
		return nil, fmt.Errorf("read doc comments in %s: %w", dir, err)
	}
	render := func(text string) string {
		p := pkg.Printer()
		p.TextWidth = -1 // one line per paragraph: JSON viewers wrap.
		return strings.TrimSpace(string(p.Text(pkg.Parser().Parse(text))))
	}
	docs := map[string]typeDocs{}
	for _, t := range pkg.Types {
		td := typeDocs{doc: render(t.Doc), fields: map[string]string{}}
		for _, spec := range t.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok || ts.Name.Name != t.Name {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, f := range st.Fields.List {
				for _, name := range f.Names {
					td.fields[name.Name] = render(f.Doc.Text())
				}
			}
		}
		docs[t.Name] = td
	}
	return docs, nil
}

// generator collects the $defs of the struct types it meets.
type generator struct {
	docs map[string]typeDocs
	defs map[string]any
}

// object returns the schema of a struct type: its fields as properties,
// and no others, since the decoder rejects unknown fields.
func (g *generator) object(t reflect.Type) (map[string]any, error) {
	td, ok := g.docs[t.Name()]
	if !ok || td.doc == "" {
		return nil, fmt.Errorf("type %s has no doc comment; it becomes the schema's description", t.Name())
	}
	props := map[string]any{}
	required := []string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _ := v1alpha1.JSONName(f)
		if name == "" {
			continue
		}
		if f.Anonymous {
			return nil, fmt.Errorf("%s.%s: embedded fields are not supported: the decoder does not flatten them", t.Name(), f.Name)
		}
		p, err := g.property(t, f)
		if err != nil {
			return nil, err
		}
		props[name] = p
		if v1alpha1.FieldRules(f).Required {
			required = append(required, name)
		}
	}
	s := map[string]any{
		"type":                 "object",
		"description":          td.doc,
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}

// property returns the schema of field f of struct type parent.
func (g *generator) property(parent reflect.Type, f reflect.StructField) (map[string]any, error) {
	where := parent.Name() + "." + f.Name
	desc := g.docs[parent.Name()].fields[f.Name]
	if desc == "" {
		return nil, fmt.Errorf("field %s has no doc comment; it becomes the property's description", where)
	}
	s, err := g.schema(f.Type, where)
	if err != nil {
		return nil, err
	}
	s["description"] = desc

	rules := v1alpha1.FieldRules(f)
	kind := f.Type.Kind()
	if kind == reflect.Pointer {
		kind = f.Type.Elem().Kind()
	}
	if len(rules.Enum) > 0 {
		if kind != reflect.String {
			return nil, fmt.Errorf("field %s: enum on a %s field", where, kind)
		}
		// An empty string in the tag's list means the field may be left
		// out, which the schema says by not listing it as required; it is
		// not a value to offer. The decoder still accepts `approve: ""`
		// (an example plan writes it), so the schema must too.
		var enum []string
		for _, v := range rules.Enum {
			if v != "" {
				enum = append(enum, v)
			}
		}
		if len(enum) < len(rules.Enum) {
			s["anyOf"] = []any{map[string]any{"enum": enum}, map[string]any{"const": ""}}
		} else {
			s["enum"] = enum
		}
	}
	if rules.HasMin {
		if kind != reflect.Int {
			return nil, fmt.Errorf("field %s: min on a %s field", where, kind)
		}
		s["minimum"] = rules.Min
	}
	if rules.Format != "" {
		if kind != reflect.String {
			return nil, fmt.Errorf("field %s: format on a %s field", where, kind)
		}
		if err := addFormat(s, rules.Format); err != nil {
			return nil, fmt.Errorf("field %s: %w", where, err)
		}
	}
	if rules.Required {
		// The decoder treats `name: ""`, `list: []` and `map: {}` of a
		// required field as missing.
		switch kind {
		case reflect.String:
			s["minLength"] = 1
		case reflect.Slice:
			s["minItems"] = 1
		case reflect.Map:
			s["minProperties"] = 1
		}
	}
	return s, nil
}

// schema returns the schema of a Go type; struct types go to $defs once
// and are referred to.
func (g *generator) schema(t reflect.Type, where string) (map[string]any, error) {
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem(), where)
	case reflect.Struct:
		if _, done := g.defs[t.Name()]; !done {
			g.defs[t.Name()] = nil // a type that refers to itself stops here
			def, err := g.object(t)
			if err != nil {
				return nil, err
			}
			g.defs[t.Name()] = def
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}, nil
	case reflect.Slice:
		items, err := g.schema(t.Elem(), where)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("field %s: map keys must be strings, got %s", where, t.Key())
		}
		values, err := g.schema(t.Elem(), where)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": values}, nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Int:
		return map[string]any{"type": "integer"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	}
	return nil, fmt.Errorf("field %s: type %s has no JSON Schema equivalent here", where, t)
}

// Patterns of the string formats. They mirror the checks in
// internal/planfile (format.go), which a test there holds them to:
// Kubernetes' DNS-1123 rules and Go's time.ParseDuration syntax.
const (
	dns1123Label     = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	dns1123Subdomain = dns1123Label + `(\.` + dns1123Label + `)*`
	goDuration       = `\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+`
)

// addFormat adds the keywords that check a `ferry` format to s.
func addFormat(s map[string]any, format string) error {
	switch format {
	case "dns1123-subdomain":
		s["pattern"] = "^" + dns1123Subdomain + "$"
		s["maxLength"] = 253
	case "dns1123-label":
		s["pattern"] = "^" + dns1123Label + "$"
		s["maxLength"] = 63
	case "duration":
		s["pattern"] = "^" + goDuration + "$"
	case "url":
		// format is only an annotation for most validators; the pattern
		// is what rejects ftp:// or a bare host name. The scheme is case
		// insensitive (net/url lowercases it) and JSON Schema patterns
		// have no (?i).
		s["format"] = "uri"
		s["pattern"] = "^[Hh][Tt][Tt][Pp][Ss]?://"
	default:
		return fmt.Errorf("unknown format %q", format)
	}
	return nil
}
