// Decoding one YAML node into the plan's Go value by reflection: every
// problem is recorded with its field path and line, and decoding goes on.

package planfile

import (
	"fmt"
	"reflect"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

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
		return d.list(n, v, path)
	case reflect.Map:
		return d.stringMap(n, v, path)
	case reflect.String:
		s, ok := d.scalar(n, path, "!!str", "a string")
		if ok {
			v.SetString(s)
		}
		return ok
	case reflect.Int:
		return d.integer(n, v, path)
	case reflect.Bool:
		return d.boolean(n, v, path)
	default:
		panic(fmt.Sprintf("planfile: field %s has unsupported type %s", path, v.Type()))
	}
}

// list decodes a sequence into a slice, recording the line of each item;
// an empty item is an error, not a zero value.
func (d *decoder) list(n *yaml.Node, v reflect.Value, path string) bool {
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
}

// integer decodes an integer scalar that fits in an int.
func (d *decoder) integer(n *yaml.Node, v reflect.Value, path string) bool {
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
}

// boolean decodes true or false.
func (d *decoder) boolean(n *yaml.Node, v reflect.Value, path string) bool {
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
