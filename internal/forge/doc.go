// Package forge talks to the Git forge (GitHub and GitHub Enterprise through
// go-github): preview and progress comments on pull requests, commit statuses,
// and who merged the pull request that approved a phase.
package forge
