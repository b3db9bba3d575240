package planfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// MaxSize is the largest plan file accepted. A plan is a page of YAML; a
// file a hundred times that is a mistake, not a plan.
const MaxSize = 1 << 20

// File is a decoded, defaulted and validated plan.
type File struct {
	// Path of the file as it was given.
	Path string
	// Plan is the plan with defaults applied.
	Plan *v1alpha1.MigrationPlan
	// lines maps field paths to the line they are on.
	lines map[string]int
}

// Line returns the line of a field path, or of its closest parent that is in
// the file; 0 when none is.
func (f *File) Line(field string) int {
	return lookupLine(f.lines, field)
}

// Decode reads one plan from data. It decodes strictly (unknown fields,
// wrong types, duplicate keys, anchors and several documents are errors),
// applies the defaults and validates the result. All problems are returned
// at once as Errors, each naming path, line and field.
func Decode(path string, data []byte) (*File, error) {
	d := &decoder{file: path, lines: map[string]int{}}
	plan := &v1alpha1.MigrationPlan{}
	if len(data) > MaxSize {
		d.errorf(0, "", "file is %d bytes; a plan may be at most %d", len(data), MaxSize)
		return nil, d.errs
	}
	root, ok := d.parse(data)
	if !ok {
		return nil, d.errs
	}
	d.value(root, reflect.ValueOf(plan).Elem(), "")
	// The semantic rules run on what did decode, so that one pass reports
	// everything; a rule about a field that already has a problem, or about
	// a field next to or under it, would only repeat it.
	decodeErrs := len(d.errs)
	v1alpha1.Default(plan)
	f := &File{Path: path, Plan: plan, lines: d.lines}
	for _, fe := range validate(plan) {
		if decodeErrs > 0 && d.related(fe.field, decodeErrs) {
			continue
		}
		d.errs = append(d.errs, &Error{File: path, Line: f.Line(fe.field), Field: fe.field, Msg: fe.msg})
	}
	if len(d.errs) > 0 {
		d.errs.sort()
		return nil, d.errs
	}
	return f, nil
}

// related reports whether field is, contains or is inside a field among the
// first n errors, or whether one of them is about the whole document.
func (d *decoder) related(field string, n int) bool {
	for _, e := range d.errs[:n] {
		if e.Field == "" || e.Field == field ||
			strings.HasPrefix(field, e.Field+".") || strings.HasPrefix(field, e.Field+"[") ||
			strings.HasPrefix(e.Field, field+".") || strings.HasPrefix(e.Field, field+"[") {
			return true
		}
	}
	return false
}

type decoder struct {
	file  string
	errs  Errors
	lines map[string]int
}

func (d *decoder) errorf(line int, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse returns the root node of the only document in data.
func (d *decoder) parse(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(0, "", "file is empty; expected a MigrationPlan")
			return nil, false
		}
		d.syntaxError(err)
		return nil, false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntaxError(err)
		return nil, false
	default:
		d.errorf(extra.Line, "", "a second YAML document; a plan file holds exactly one MigrationPlan")
		return nil, false
	}
	if len(doc.Content) == 0 {
		d.errorf(0, "", "file is empty; expected a MigrationPlan")
		return nil, false
	}
	return doc.Content[0], true
}

func (d *decoder) syntaxError(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.errorf(line, "", "invalid YAML: %s", m[2])
		return
	}
	d.errorf(0, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

// value decodes n into v, recording errors rather than stopping at the
// first. It reports whether n itself decoded (problems inside a mapping or
// list are recorded but do not count).
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		// Aliases let a few lines expand into gigabytes and make a reviewer
		// read the plan twice; plans are short enough to write out.
		d.errorf(n.Line, path, "YAML anchors and aliases are not supported in plans; write the value out")
		return false
	}
	if isNull(n) {
		return true
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.value(n, v.Elem(), path)
	case reflect.Struct:
		return d.structure(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n.Line, path, "expected a list, got %s", describe(n))
			return false
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = item.Line
			if isNull(item) {
				// `- ` or `- ~` would decode to a zero item that no
				// field rule sees; it is a slip, not a value.
				d.errorf(item.Line, p, "empty list item; remove it or fill it in")
				continue
			}
			d.value(item, s.Index(i), p)
		}
		v.Set(s)
		return true
	case reflect.Map:
		return d.stringMap(n, v, path)
	case reflect.String:
		s, ok := d.scalar(n, path, "!!str", "a string")
		if ok {
			v.SetString(s)
		}
		return ok
	case reflect.Int:
		s, ok := d.scalar(n, path, "!!int", "an integer")
		if !ok {
			return false
		}
		i, err := strconv.ParseInt(s, 0, 64)
		if err != nil || int64(int(i)) != i {
			d.errorf(n.Line, path, "expected an integer that fits in %d bits, got %s", strconv.IntSize, s)
			return false
		}
		v.SetInt(i)
		return true
	case reflect.Bool:
		s, ok := d.scalar(n, path, "!!bool", "true or false")
		if !ok {
			return false
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			d.errorf(n.Line, path, "expected true or false, got %s", s)
			return false
		}
		v.SetBool(b)
		return true
	default:
		panic(fmt.Sprintf("planfile: field %s has unsupported type %s", path, v.Type()))
	}
}

// structure decodes a mapping into a struct, reporting unknown, duplicate
// and missing fields and checking each field's rules.
func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "expected a mapping with fields %s, got %s", fieldList(v.Type()), describe(n))
		return false
	}
	t := v.Type()
	present := map[string]bool{}
	seen := d.pairs(n, path, "a field name", func(key, val *yaml.Node, p string) {
		idx := fieldIndex(t, key.Value)
		if idx < 0 {
			if looksLikeSecretKey(key.Value) {
				d.errorf(key.Line, p, "%s", inlineSecretMsg)
				return
			}
			d.errorf(key.Line, p, "unknown field; expected one of %s", fieldList(t))
			return
		}
		d.lines[p] = key.Line
		present[key.Value] = !isNull(val)
		if d.value(val, v.Field(idx), p) {
			if v1alpha1.FieldRules(t.Field(idx)).Required && isEmpty(v.Field(idx)) {
				// `name: ""` or `list: []` leaves a required field as
				// empty as leaving it out; the loop below reports it once.
				present[key.Value] = false
				return
			}
			d.checkRules(val, v.Field(idx), t.Field(idx), p)
		}
	})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _ := v1alpha1.JSONName(f)
		if name == "" || !v1alpha1.FieldRules(f).Required {
			continue
		}
		if _, ok := seen[name]; !ok {
			d.errorf(n.Line, join(path, name), "required field is missing")
		} else if !present[name] {
			d.errorf(seen[name], join(path, name), "required field is empty")
		}
	}
	return true
}

// pairs calls fn with each key, value and field path of a mapping, after
// reporting keys that are not plain scalars (want says what a key should
// be) and keys set twice. It returns the line each key was first set on.
func (d *decoder) pairs(n *yaml.Node, path, want string, fn func(key, val *yaml.Node, p string)) map[string]int {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		p := join(path, key.Value)
		if key.Kind != yaml.ScalarNode || key.Tag == "!!merge" {
			d.errorf(key.Line, path, "expected %s, got %s", want, describe(key))
			continue
		}
		if first, dup := seen[key.Value]; dup {
			d.errorf(key.Line, p, "duplicate key; first set on line %d", first)
			continue
		}
		seen[key.Value] = key.Line
		fn(key, val, p)
	}
	return seen
}

func (d *decoder) stringMap(n *yaml.Node, v reflect.Value, path string) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "expected a mapping of strings, got %s", describe(n))
		return false
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	d.pairs(n, path, "a key", func(key, val *yaml.Node, p string) {
		d.lines[p] = key.Line
		s := reflect.New(v.Type().Elem()).Elem()
		// `key:` and `key: ""` both mean the empty string in a label map.
		if isNull(val) || d.value(val, s, p) {
			m.SetMapIndex(reflect.ValueOf(key.Value), s)
		}
	})
	v.Set(m)
	return true
}

// scalar returns the text of a scalar node whose YAML tag is tag.
func (d *decoder) scalar(n *yaml.Node, path, tag, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, path, "expected %s, got %s", want, describe(n))
		return "", false
	}
	if n.Tag != tag && n.ShortTag() != tag {
		if tag == "!!str" {
			d.errorf(n.Line, path, "expected a string, got %s; quote it: \"%s\"", describe(n), n.Value)
		} else {
			d.errorf(n.Line, path, "expected %s, got %s", want, describe(n))
		}
		return "", false
	}
	if tag == "!!str" && looksLikeSecretValue(n.Value) {
		d.errorf(n.Line, path, "%s", inlineSecretMsg)
		return "", false
	}
	return n.Value, true
}

// checkRules checks the `ferry` tag rules of a field that decoded.
func (d *decoder) checkRules(n *yaml.Node, v reflect.Value, f reflect.StructField, path string) {
	rules := v1alpha1.FieldRules(f)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if len(rules.Enum) > 0 && !contains(rules.Enum, s) {
			d.errorf(n.Line, path, "must be one of %s, got %q", enumList(rules.Enum), s)
			return
		}
		if s != "" && rules.Format != "" {
			if msg := checkFormat(rules.Format, s); msg != "" {
				d.errorf(n.Line, path, "%s", msg)
			}
		}
	case reflect.Int:
		if rules.HasMin && v.Int() < int64(rules.Min) {
			d.errorf(n.Line, path, "must be >= %d, got %d", rules.Min, v.Int())
		}
	}
}

// isEmpty reports whether a decoded string, list or map holds nothing.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return false
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("the string %q", n.Value)
	case "!!int":
		return "the integer " + n.Value
	case "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	case "!!null":
		return "nothing"
	}
	return fmt.Sprintf("%s %q", n.ShortTag(), n.Value)
}

func fieldIndex(t reflect.Type, name string) int {
	for i := 0; i < t.NumField(); i++ {
		if n, _ := v1alpha1.JSONName(t.Field(i)); n == name {
			return i
		}
	}
	return -1
}

func fieldList(t reflect.Type) string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if n, _ := v1alpha1.JSONName(t.Field(i)); n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func enumList(values []string) string {
	var out []string
	for _, v := range values {
		if v != "" {
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// lookupLine finds the line of field or of its closest recorded parent.
func lookupLine(lines map[string]int, field string) int {
	for field != "" {
		if l, ok := lines[field]; ok {
			return l
		}
		cut := strings.LastIndexAny(field, ".[")
		if cut < 0 {
			break
		}
		field = field[:cut]
	}
	return 0
}
