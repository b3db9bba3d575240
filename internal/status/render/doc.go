// Package render turns a plan's status into text for people: Table, the
// phase table `reconciler status` prints; PhaseLine, one phase in one line
// for logs and `status --watch`; and Markdown, the pull-request comment,
// its untrusted text escaped so that an error message cannot reshape it,
// and cut to the forge's size limit with a link to the full status.
//
// It only reads a status (internal/status) and writes text. It must not
// import Git (internal/layering's rule "the status imports no Git
// package" covers internal/status/...), the forge (rule "the status
// speaks to no forge, cluster or cloud"), the reconciler or the status
// file (rule "the status file and its text are apart"): posting the
// comment is the reconciler's, through internal/forge.
package render
