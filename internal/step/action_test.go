package step

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestActionsListsEveryAction: Actions, which the step catalogue in the
// docs is checked against, names every Action constant of action.go.
func TestActionsListsEveryAction(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "action.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Action" {
				continue
			}
			for _, name := range v.Names {
				declared++
				if !slices.ContainsFunc(Actions(), func(a Action) bool { return string(a) == constValue(v) }) {
					t.Errorf("Actions() misses %s", name.Name)
				}
			}
		}
	}
	if declared != len(Actions()) {
		t.Errorf("action.go declares %d actions, Actions() lists %d", declared, len(Actions()))
	}
}

// constValue is the string literal a one-name constant spec sets.
func constValue(v *ast.ValueSpec) string {
	lit, ok := v.Values[0].(*ast.BasicLit)
	if !ok || len(lit.Value) < 2 {
		return ""
	}
	return lit.Value[1 : len(lit.Value)-1]
}
