package planfile

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a plan file: where it is and what was expected.
type Error struct {
	// File is the path of the plan file as it was given.
	File string
	// Line is the 1-based line of the field, or 0 when the problem is the
	// file as a whole.
	Line int
	// Field is the path of the field, like spec.target.workers[1].replicas;
	// empty for the document.
	Field string
	// Msg says what is wrong and what is expected.
	Msg string
}

// Error formats e as file:line: field: message, the shape editors and CI
// logs link to the line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors are all problems found in one or more plan files, in file and line
// order. A plan with any Error is not used.
type Errors []*Error

// Error prints one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.Is and errors.As each problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (es Errors) sort() {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Field < b.Field
	})
}
