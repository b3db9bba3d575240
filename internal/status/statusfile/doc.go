// Package statusfile is a plan's status as a file: status/<plan>.yaml on
// the status branch (DefaultBranch, Dir, Path), its YAML document (Encode,
// which every YAML reader reads back the same) and its reading (Decode).
// It only turns statuses into bytes and back: where and when the bytes
// are committed is the status store's, GitStatusStore in
// internal/reconciler.
//
// It imports the status and YAML. It must not import Git
// (internal/layering's rule "the status imports no Git package" covers
// internal/status/...), the forge (rule "the status speaks to no forge,
// cluster or cloud"), the reconciler or a renderer (rule "the status file
// and its text are apart").
package statusfile
