// Package gitsource fetches the repository of migration plans with go-git
// (http(s), ssh, file) and hands the planner a revision and a read-only
// fs.FS of the plans directory. It skips the fetch when the remote head has
// not moved. A webhook only triggers an early poll; polling stays the source
// of truth.
package gitsource
