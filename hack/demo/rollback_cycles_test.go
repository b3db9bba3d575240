package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCreatedSince: an object created again in a later cycle is not
// repeated; one created twice since the cycle began is.
func TestCreatedSince(t *testing.T) {
	create := func(resource, name string) string {
		return `{"verb":"create","objectRef":{"resource":"` + resource + `","namespace":"default","name":"` + name + `"},"responseStatus":{"code":201}}`
	}
	log := filepath.Join(t.TempDir(), "audit.log")
	write := func(lines ...string) {
		if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(create("clusters", "c"), create("machines", "m"))
	repeated, base, err := createdSince(log, nil)
	if err != nil || len(repeated) != 0 || base["clusters default/c"] != 1 {
		t.Fatalf("first cycle: repeated %v, counts %v, %v", repeated, base, err)
	}
	write(create("clusters", "c"), create("machines", "m"), create("clusters", "c"), create("machines", "m"), create("machines", "m"))
	repeated, _, err = createdSince(log, base)
	if err != nil || !slices.Equal(repeated, []string{"machines default/m created 2 times"}) {
		t.Errorf("second cycle: repeated %v, %v", repeated, err)
	}
}

// TestProblemsErr: an error wins; problems are joined; none is nil.
func TestProblemsErr(t *testing.T) {
	if err := problemsErr(nil, nil); err != nil {
		t.Errorf("no problem: %v", err)
	}
	if err := problemsErr(nil, []string{"a", "b"}); err == nil || err.Error() != "a; b" {
		t.Errorf("problems: %v", err)
	}
	//nolint:errorlint // the error itself, not one that wraps it: the problems are dropped
	if err := problemsErr(os.ErrNotExist, []string{"a"}); err != os.ErrNotExist {
		t.Errorf("an error and problems: %v", err)
	}
}
