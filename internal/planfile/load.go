package planfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IsPlanFile reports whether a file name is one a plans directory is read
// for: YAML files. Other files (a README) are left alone.
func IsPlanFile(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// LoadFS decodes every plan file under dir in fsys (recursively, in lexical
// order). Files that decode are returned even when others fail; the error
// holds every problem of every file, and the plans that clash with another
// (same name, same cluster) are not returned.
func LoadFS(fsys fs.FS, dir string) ([]*File, error) {
	var names []string
	err := fs.WalkDir(fsys, dir, collect(&names))
	if err != nil {
		return nil, fmt.Errorf("read plans in %s: %w", dir, err)
	}
	return decodeAll(names, func(name string) ([]byte, error) { return fs.ReadFile(fsys, name) })
}

// LoadPaths decodes the plan files named by paths; a directory stands for
// the plan files under it. It is what `reconciler validate` runs. A path
// that cannot be read is an error of its own, not a problem of a plan.
func LoadPaths(paths []string) ([]*File, error) {
	var names []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			names = append(names, p)
			continue
		}
		if err := filepath.WalkDir(p, collect(&names)); err != nil {
			return nil, err
		}
	}
	return decodeAll(names, os.ReadFile)
}

// collect is a WalkDirFunc that gathers plan file names.
func collect(names *[]string) fs.WalkDirFunc {
	return func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && IsPlanFile(name) {
			*names = append(*names, name)
		}
		return nil
	}
}

// decodeAll reads and decodes each named file, then rejects clashes.
func decodeAll(names []string, read func(string) ([]byte, error)) ([]*File, error) {
	var files []*File
	var errs Errors
	for _, name := range names {
		data, err := read(name)
		if err != nil {
			errs = append(errs, &Error{File: name, Msg: err.Error()})
			continue
		}
		f, err := Decode(name, data)
		if err != nil {
			errs = append(errs, asErrors(name, err)...)
			continue
		}
		files = append(files, f)
	}
	return checkUnique(files, errs)
}

func asErrors(name string, err error) Errors {
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	return Errors{{File: name, Msg: err.Error()}}
}

// checkUnique rejects plans that share a name (their status files would
// collide) or a cluster (two plans would fight over it).
func checkUnique(files []*File, errs Errors) ([]*File, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	byName := map[string]*File{}
	byCluster := map[string]*File{}
	bad := map[*File]bool{}
	for _, f := range files {
		name := f.Plan.Metadata.Name
		if first, dup := byName[name]; dup {
			// Both files get the error: neither plan runs, and each
			// file's author must see why.
			for _, pair := range [][2]*File{{f, first}, {first, f}} {
				errs = append(errs, &Error{File: pair[0].Path, Line: pair[0].Line("metadata.name"), Field: "metadata.name",
					Msg: fmt.Sprintf("plan %q is also defined in %s; plan names must be unique", name, pair[1].Path)})
			}
			bad[f], bad[first] = true, true
		} else {
			byName[name] = f
		}
		c := f.Plan.Spec.Cluster
		key := c.Namespace + "/" + c.Name
		if first, dup := byCluster[key]; dup {
			for _, pair := range [][2]*File{{f, first}, {first, f}} {
				errs = append(errs, &Error{File: pair[0].Path, Line: pair[0].Line("spec.cluster"), Field: "spec.cluster",
					Msg: fmt.Sprintf("cluster %s is also migrated by %s; one plan per cluster", key, pair[1].Path)})
			}
			bad[f], bad[first] = true, true
		} else {
			byCluster[key] = f
		}
	}
	var ok []*File
	for _, f := range files {
		if !bad[f] {
			ok = append(ok, f)
		}
	}
	if len(errs) > 0 {
		errs.sort()
		return ok, errs
	}
	return ok, nil
}
