// Package status is a plan's status as data: per phase Pending, Approved,
// Running, Succeeded, Failed or Blocked; per step its state, attempts, last
// error and timestamps; the revision it was planned from and who approved it.
// It is written to Git as status/<plan>.yaml and rendered into PR comments.
//
// Each cycle the reconciler loop, for each plan, merges the planner's result
// into the previous status (FromResult), marks the group it publishes
// (Published), takes in the executors' results (ApplyResult) and who approved
// (SetApproval), and feeds the status back to the planner (Record). These
// functions are pure. A Store lays the statuses out as files for the Git
// branch (gitsource.Branch), which commits the ones that changed in one
// commit to the status branch and reads them back; Table and Markdown render
// a status for `reconciler status` and for the pull-request comment. Nothing
// here speaks Git itself.
package status
