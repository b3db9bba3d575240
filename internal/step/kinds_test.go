package step

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// TestTargetKindsListsEveryKind: targetKinds, which ParseKey reads kinds
// back with, has one entry per target kind constant of kinds.go, and no
// two kinds lowercase alike (a key holds them lowercased).
func TestTargetKindsListsEveryKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "kinds.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || !slices.ContainsFunc(g.Specs, func(s ast.Spec) bool { return s.(*ast.ValueSpec).Names[0].Name == "Secret" }) {
			continue
		}
		for _, spec := range g.Specs {
			declared += len(spec.(*ast.ValueSpec).Names)
		}
	}
	if declared != len(targetKinds) {
		t.Errorf("kinds.go declares %d target kinds, targetKinds lists %d", declared, len(targetKinds))
	}
	seen := map[string]bool{}
	for _, k := range targetKinds {
		if seen[strings.ToLower(k)] {
			t.Errorf("target kind %s twice, or two kinds that lowercase alike", k)
		}
		seen[strings.ToLower(k)] = true
	}
}
