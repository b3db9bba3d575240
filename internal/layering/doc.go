// Package layering holds no code: its test enforces the import rules that
// the packages' doc comments state, from `go list -deps` of the module.
package layering
