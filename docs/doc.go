// Package docs holds ferry's documentation; its tests check that the
// README and the pages link to files and headings that exist.
//
// It holds no Go code (doc.go is here for this comment) and imports
// nothing. The generated pages are checked where they are generated from:
// commands.md and the commands the pages show by cmd/reconciler's tests,
// steps.md by internal/planner's.
package docs
