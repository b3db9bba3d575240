// Command schemagen writes the JSON Schema of plan files,
// api/v1alpha1/migrationplan.schema.json, from the Go types in
// api/v1alpha1: the json tags name the properties, the `ferry` tags give
// the rules, and the doc comments become the descriptions, so that editors
// show the same rules and words as the decoder and the Go documentation.
//
// Usage (from anywhere in the module; `make generate` runs it):
//
//	go run ./hack/schemagen [-o PATH] [-check]
//
// Exit status: 0 written or up to date, 1 -check found the file out of
// date, 2 the schema could not be generated or written.
//
// It imports api/v1alpha1 and the standard library only, and parses
// api/v1alpha1's source for the doc comments; nothing imports it.
package main
