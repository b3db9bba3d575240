package v1alpha1

import (
	"reflect"
	"strconv"
	"strings"
)

// Rules are the checks a `ferry` struct tag puts on a field. The decoder
// enforces them and the schema generator writes them out.
type Rules struct {
	// Required fields must be present and not empty.
	Required bool
	// Enum lists the allowed strings; empty allows any. An empty string in
	// the list means the field may be left out.
	Enum []string
	// Min is the smallest allowed integer, when HasMin.
	Min    int
	HasMin bool
	// Format names a string format: dns1123-subdomain, dns1123-label,
	// duration or url.
	Format string
}

// FieldRules parses the `ferry` tag of f. It panics on a malformed tag: tags
// are constants in this package and a test parses every one.
func FieldRules(f reflect.StructField) Rules {
	var r Rules
	tag := f.Tag.Get("ferry")
	if tag == "" {
		return r
	}
	for _, part := range strings.Split(tag, ",") {
		key, value, _ := strings.Cut(part, "=")
		switch key {
		case "required":
			r.Required = true
		case "enum":
			r.Enum = strings.Split(value, "|")
		case "min":
			n, err := strconv.Atoi(value)
			if err != nil {
				panic("v1alpha1: bad min in ferry tag of " + f.Name + ": " + value)
			}
			r.Min, r.HasMin = n, true
		case "format":
			r.Format = value
		default:
			panic("v1alpha1: unknown rule in ferry tag of " + f.Name + ": " + part)
		}
	}
	return r
}

// JSONName returns the field's name in YAML and JSON and whether it may be
// left out; "" means the field is not part of the format.
func JSONName(f reflect.StructField) (name string, omitempty bool) {
	tag := f.Tag.Get("json")
	if tag == "-" || !f.IsExported() {
		return "", false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, strings.Contains(opts, "omitempty")
}
