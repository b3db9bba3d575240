// Package status is a plan's status as data: per phase Pending, Approved,
// Running, Succeeded, Failed or Blocked; per step its state, attempts, last
// error and timestamps; the revision it was planned from and who approved it.
// It is written to Git as status/<plan>.yaml and rendered into PR comments.
package status
