package main

import (
	"slices"
	"testing"
)

// TestShortComment: a preview's "Phases:" lines, and a progress comment's
// phase rows without their empty cells, are what the later rollback
// cycles show of ferry's comments.
func TestShortComment(t *testing.T) {
	preview := "<!-- ferry:preview -->\n### ferry preview of #5 at 836290ab68f9\n\n```\nPlan c: cluster default/c\n\nPhases:\n" +
		"  cluster        Succeeded  11 done, 0 left\n  control-plane  Approved   0 done, 11 left; runs next\n\nSteps of phase control-plane:\n  1. kube: create …\n```\n"
	if got, want := shortComment(preview), []string{"cluster        Succeeded  11 done, 0 left", "control-plane  Approved   0 done, 11 left; runs next"}; !slices.Equal(got, want) {
		t.Errorf("preview:\n got %q\nwant %q", got, want)
	}
	progress := "### ferry: plan `c`\n\nc at revision 9a8b7c6d5e4f: approve cluster\n\n| Phase | State | Done/left | Current step | Attempts | Last error | Approved by |\n" +
		"| --- | --- | --- | --- | --- | --- | --- |\n| cluster | Succeeded | 6/0 |  |  |  | bob (#5) |\n| workers | Pending | 0/2 |  |  |  |  |\n\n#### Steps\n\n| Phase | Step | State |\n| --- | --- | --- |\n| cluster | kube: create Cluster | Succeeded |\n"
	if got, want := shortComment(progress), []string{"cluster  Succeeded  6/0  bob (#5)", "workers  Pending    0/2"}; !slices.Equal(got, want) {
		t.Errorf("progress:\n got %q\nwant %q", got, want)
	}
	if got := shortComment("no table"); len(got) != 0 {
		t.Errorf("a comment without a table: %q", got)
	}
}
