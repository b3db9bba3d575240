// Package statusfile is a plan's status as a file: status/<plan>.yaml on
// the status branch (DefaultBranch, Dir, Path), its YAML document (Encode,
// byte for byte what every YAML reader reads back the same) and its
// reading (Decode). It only turns statuses into bytes and back: where
// and when the bytes are committed is the status store's, GitStatusStore
// in internal/reconciler.
//
// It imports the status and the data the status holds, never Git or any
// other backend, nor the reconciler or a renderer (internal/layering's
// rule "the status imports no Git package" covers internal/status/...).
package statusfile
