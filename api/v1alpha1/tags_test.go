package v1alpha1

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// formats are the string formats the decoder (internal/planfile) and the
// schema generator (hack/schemagen) know; both panic or fail on others.
var formats = []string{"dns1123-subdomain", "dns1123-label", "duration", "url"}

// planTypes returns every named type of this package that a MigrationPlan
// contains, MigrationPlan first, each once.
func planTypes() []reflect.Type {
	var out []reflect.Type
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.PkgPath() != reflect.TypeFor[MigrationPlan]().PkgPath() || seen[t] {
			return
		}
		seen[t] = true
		out = append(out, t)
		if t.Kind() == reflect.Struct {
			for i := 0; i < t.NumField(); i++ {
				walk(t.Field(i).Type)
			}
		}
	}
	walk(reflect.TypeFor[MigrationPlan]())
	return out
}

// Every `ferry` tag of the format parses, and each rule fits its field: a
// rule on the wrong kind of field would be silently ignored by the decoder.
func TestFerryTags(t *testing.T) {
	structs := 0
	for _, st := range planTypes() {
		if st.Kind() != reflect.Struct {
			continue
		}
		structs++
		names := map[string]string{}
		for i := 0; i < st.NumField(); i++ {
			f := st.Field(i)
			where := st.Name() + "." + f.Name
			name, _ := JSONName(f)
			if name == "" {
				t.Errorf("%s is not part of the format (no json name); plan types hold only format fields", where)
				continue
			}
			if other, dup := names[name]; dup {
				t.Errorf("%s and %s.%s share the json name %q", where, st.Name(), other, name)
			}
			names[name] = f.Name

			rules, err := parseRules(f)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			kind := f.Type.Kind()
			if kind == reflect.Pointer {
				kind = f.Type.Elem().Kind()
			}
			if len(rules.Enum) > 0 && kind != reflect.String {
				t.Errorf("%s: enum on a %s field", where, kind)
			}
			if rules.HasMin && kind != reflect.Int {
				t.Errorf("%s: min on a %s field", where, kind)
			}
			if rules.Format != "" && (kind != reflect.String || !slices.Contains(formats, rules.Format)) {
				t.Errorf("%s: format %q on a %s field; formats are %s of strings", where, rules.Format, kind, strings.Join(formats, ", "))
			}
			for j, v := range rules.Enum {
				if slices.Contains(rules.Enum[:j], v) {
					t.Errorf("%s: enum lists %q twice", where, v)
				}
			}
			if rules.Required && slices.Contains(rules.Enum, "") {
				t.Errorf("%s: required, yet its enum allows the empty string", where)
			}
		}
	}
	if structs < 10 {
		t.Fatalf("walked %d struct types from MigrationPlan; the walk is broken", structs)
	}
}

// parseRules is FieldRules with its panic turned into an error.
func parseRules(f reflect.StructField) (r Rules, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ferry tag %q does not parse: %v", f.Tag.Get("ferry"), p)
		}
	}()
	return FieldRules(f), nil
}

func TestFieldRules(t *testing.T) {
	tests := []struct {
		tag       string
		want      Rules
		wantPanic string
	}{
		{tag: ``, want: Rules{}},
		{tag: `required`, want: Rules{Required: true}},
		{tag: `required,enum=a|b`, want: Rules{Required: true, Enum: []string{"a", "b"}}},
		{tag: `enum=|a`, want: Rules{Enum: []string{"", "a"}}},
		{tag: `min=0`, want: Rules{Min: 0, HasMin: true}},
		{tag: `required,min=-3,format=duration`, want: Rules{Required: true, Min: -3, HasMin: true, Format: "duration"}},
		{tag: `min=one`, wantPanic: "bad min in ferry tag of F: one"},
		{tag: `min`, wantPanic: "bad min in ferry tag of F: "},
		{tag: `requried`, wantPanic: "unknown rule in ferry tag of F: requried"}, //nolint:misspell // a misspelt rule on purpose
		{tag: `required,`, wantPanic: "unknown rule in ferry tag of F: "},
	}
	for _, tt := range tests {
		t.Run(tt.tag, func(t *testing.T) {
			f := reflect.StructField{Name: "F", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(`ferry:"` + tt.tag + `"`)}
			got, err := parseRules(f)
			switch {
			case tt.wantPanic != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantPanic) {
					t.Errorf("FieldRules = %+v, %v; want a panic %q", got, err, tt.wantPanic)
				}
			case err != nil:
				t.Error(err)
			case !reflect.DeepEqual(got, tt.want):
				t.Errorf("FieldRules = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestJSONName(t *testing.T) {
	type sample struct {
		Plain    string `json:"plain"`
		Optional string `json:"optional,omitempty"`
		Untagged string
		Skipped  string `json:"-"`
		hidden   string //nolint:unused // unexported: never part of the format; read through reflection only
	}
	want := map[string]struct {
		name      string
		omitempty bool
	}{
		"Plain":    {"plain", false},
		"Optional": {"optional", true},
		"Untagged": {"Untagged", false},
		"Skipped":  {"", false},
		"hidden":   {"", false},
	}
	st := reflect.TypeFor[sample]()
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		name, omitempty := JSONName(f)
		if w := want[f.Name]; name != w.name || omitempty != w.omitempty {
			t.Errorf("JSONName(%s) = %q, %v; want %q, %v", f.Name, name, omitempty, w.name, w.omitempty)
		}
	}
}

// The doc comments of the plan types are the descriptions of the JSON
// Schema (hack/schemagen) and the only documentation of the format, so
// every type and field of it has one.
func TestDocComments(t *testing.T) {
	docs := parseDocs(t)
	for _, typ := range planTypes() {
		d, ok := docs[typ.Name()]
		switch {
		case !ok:
			t.Errorf("type %s: no declaration found in the package source", typ.Name())
			continue
		case d.doc == "":
			t.Errorf("type %s (%s) has no doc comment", typ.Name(), d.pos)
		}
		if typ.Kind() != reflect.Struct {
			continue
		}
		for i := 0; i < typ.NumField(); i++ {
			name := typ.Field(i).Name
			fd, ok := d.fields[name]
			switch {
			case !ok:
				t.Errorf("field %s.%s: not found in the package source", typ.Name(), name)
			case fd.doc == "":
				t.Errorf("field %s.%s (%s) has no doc comment", typ.Name(), name, fd.pos)
			}
		}
	}
}

type declDoc struct {
	doc, pos string
	fields   map[string]declDoc
}

// parseDocs reads the doc comments of the types in this package's non-test
// source files.
func parseDocs(t *testing.T) map[string]declDoc {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	docs := map[string]declDoc{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && !gd.Lparen.IsValid() {
					// `type T ...` on its own: the comment belongs to the
					// declaration, as go/doc reads it.
					doc = gd.Doc
				}
				d := declDoc{doc: strings.TrimSpace(doc.Text()), pos: fset.Position(ts.Pos()).String(), fields: map[string]declDoc{}}
				if st, ok := ts.Type.(*ast.StructType); ok {
					for _, field := range st.Fields.List {
						for _, name := range field.Names {
							d.fields[name.Name] = declDoc{doc: strings.TrimSpace(field.Doc.Text()), pos: fset.Position(name.Pos()).String()}
						}
					}
				}
				docs[ts.Name.Name] = d
			}
		}
	}
	return docs
}
