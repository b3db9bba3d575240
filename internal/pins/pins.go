// Package pins links the libraries that ferry's later layers build on but that
// no package uses yet, so that go.mod keeps them at versions this project's
// module proxy serves and `go build ./...` proves they compile together with
// the rest. Remove an import here once a real package imports that library.
package pins

import (
	_ "github.com/google/go-github/v60/github" // forge: PR comments and statuses
)
