package planfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// MaxSize is the largest plan file accepted. A plan is a page of YAML; a
// file a hundred times that is a mistake, not a plan.
const MaxSize = 1 << 20

// tooLarge says that a file of size bytes is over MaxSize.
func tooLarge(size int64) string {
	return fmt.Sprintf("file is %d bytes; a plan may be at most %d", size, MaxSize)
}

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
		d.errorf(0, "", "%s", tooLarge(int64(len(data))))
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
