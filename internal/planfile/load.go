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
// (same name, same cluster) are not returned. A file larger than MaxSize
// is a problem of its own, found by fs.Stat: it is never read.
func LoadFS(fsys fs.FS, dir string) ([]*File, error) {
	return LoadFSWithin(fsys, dir, Limits{})
}

// Limits bound the work of loading a plans directory that anyone may have
// written, such as the head of a pull request (a fork's, too): each file
// is bounded by MaxSize, these bound the directory. The zero value bounds
// nothing.
type Limits struct {
	// Files is the most plan files read; 0 for no limit.
	Files int
	// Bytes is the most bytes read, summed over the plan files no larger
	// than MaxSize (the others are not read); 0 for no limit.
	Bytes int64
}

// LimitError is LoadFSWithin's error for a plans directory that exceeds
// its Limits. Nothing of it was read but its listing and the files'
// sizes.
type LimitError struct {
	Dir string
	// Files and Bytes are what the directory holds, as Limits counts
	// them; Bytes is 0 when the files were too many to add up.
	Files int
	Bytes int64
	// Limits are the limits exceeded.
	Limits Limits
}

func (e *LimitError) Error() string {
	if e.Limits.Files > 0 && e.Files > e.Limits.Files {
		return fmt.Sprintf("%s holds %d plan files; at most %d are read", e.Dir, e.Files, e.Limits.Files)
	}
	return fmt.Sprintf("%s holds %d bytes of plan files; at most %d are read", e.Dir, e.Bytes, e.Limits.Bytes)
}

// LoadFSWithin is LoadFS within lim: when dir holds more plan files, or
// more bytes of them, than lim allows, it reads none and returns a
// *LimitError. The sizes are fs.Stat's, known before a file is read.
func LoadFSWithin(fsys fs.FS, dir string, lim Limits) ([]*File, error) {
	var names []string
	err := fs.WalkDir(fsys, dir, collect(&names))
	if err != nil {
		return nil, fmt.Errorf("read plans in %s: %w", dir, err)
	}
	if lim.Files > 0 && len(names) > lim.Files {
		return nil, &LimitError{Dir: dir, Files: len(names), Limits: lim}
	}
	stat := func(name string) (int64, error) {
		info, err := fs.Stat(fsys, name)
		if err != nil {
			return 0, err
		}
		return info.Size(), nil
	}
	if lim.Bytes > 0 {
		var total int64
		for _, name := range names {
			if size, err := stat(name); err == nil && size <= MaxSize {
				total += size // a larger file, or one that cannot be read, is not read
			}
		}
		if total > lim.Bytes {
			return nil, &LimitError{Dir: dir, Files: len(names), Bytes: total, Limits: lim}
		}
	}
	return decodeAll(names, stat, func(name string) ([]byte, error) { return fs.ReadFile(fsys, name) })
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
	stat := func(name string) (int64, error) {
		info, err := os.Stat(name)
		if err != nil {
			return 0, err
		}
		return info.Size(), nil
	}
	return decodeAll(names, stat, os.ReadFile)
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

// decodeAll reads and decodes each named file, then rejects clashes. A
// file whose size (stat) is over MaxSize is not read: a blob of a hundred
// megabytes pushed to a pull request would otherwise be held in memory
// whole before Decode refused it.
func decodeAll(names []string, stat func(string) (int64, error), read func(string) ([]byte, error)) ([]*File, error) {
	var files []*File
	var errs Errors
	for _, name := range names {
		size, err := stat(name)
		if err != nil {
			errs = append(errs, &Error{File: name, Msg: err.Error()})
			continue
		}
		if size > MaxSize {
			errs = append(errs, &Error{File: name, Msg: tooLarge(size) + "; it was not read"})
			continue
		}
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
