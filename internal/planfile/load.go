package planfile

import (
	"fmt"
	"io/fs"
	"os"
	"path"
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
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && IsPlanFile(p) {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read plans in %s: %w", dir, err)
	}
	var files []*File
	var errs Errors
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, &Error{File: name, Msg: err.Error()})
			continue
		}
		f, err := Decode(path.Clean(name), data)
		if err != nil {
			errs = append(errs, asErrors(name, err)...)
			continue
		}
		files = append(files, f)
	}
	return checkUnique(files, errs)
}

// LoadPaths decodes the plan files named by paths; a directory stands for
// the plan files under it. It is what `reconciler validate` runs.
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
		err = filepath.WalkDir(p, func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && IsPlanFile(name) {
				names = append(names, name)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var files []*File
	var errs Errors
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
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
	if es, ok := err.(Errors); ok {
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
			errs = append(errs, &Error{File: f.Path, Line: f.Line("metadata.name"), Field: "metadata.name",
				Msg: fmt.Sprintf("plan %q is also defined in %s; plan names must be unique", name, first.Path)})
			bad[f], bad[first] = true, true
		} else {
			byName[name] = f
		}
		c := f.Plan.Spec.Cluster
		key := c.Namespace + "/" + c.Name
		if first, dup := byCluster[key]; dup {
			errs = append(errs, &Error{File: f.Path, Line: f.Line("spec.cluster"), Field: "spec.cluster",
				Msg: fmt.Sprintf("cluster %s is also migrated by %s; one plan per cluster", key, first.Path)})
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
