// Field names and paths as messages show them, and what a node is called
// in "expected X, got Y".

package planfile

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

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
