// Package planfile reads migration plans from their files: strict decoding
// of the YAML (unknown fields, wrong types, duplicate keys, anchors and
// several documents are errors), the defaults of api/v1alpha1, and
// validation, the field rules the types' `ferry` tags give and the rules
// of each strategy and control-plane provider. Every problem of a file is
// reported at once, as an Error naming file, line and field, in the
// file:line: shape that editors and CI jobs read.
//
// It owns what a valid plan file is: the size limit (MaxSize, checked
// with fs.Stat before a file is read, so that an oversized file is never
// held in memory), which files of a plans directory are plans (LoadFS,
// for the reconciler reading a revision of the plans repository;
// LoadFSWithin, the same within Limits on the whole directory, for a pull
// request's head that anyone may have written; LoadPaths, for
// `reconciler validate`), two plans that clash, and refusing a secret's
// value written into a plan, which Git would keep forever.
//
// It must not import a client of a backend, nor any ferry package but
// api/v1alpha1 (internal/layering's rule "plan files are decoded without
// a backend"): `reconciler validate` checks plans offline, in a CI job
// with no cluster, bus or Git behind it.
package planfile
