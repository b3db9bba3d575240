package reconciler

import (
	"strings"
	"testing"
)

// TestParseReviewPolicy: phase=count pairs; an unknown phase, a missing
// count or one out of range is refused, naming the pair.
func TestParseReviewPolicy(t *testing.T) {
	phases := []string{"cluster", "cutover", "cleanup"}
	p, err := ParseReviewPolicy(" cleanup=2, cutover=3 ,", phases)
	if err != nil || p.String() != "cleanup=2,cutover=3" {
		t.Errorf("policy = %v, %v", p, err)
	}
	if p, err := ParseReviewPolicy("", phases); err != nil || len(p) != 0 {
		t.Errorf("empty policy = %v, %v", p, err)
	}
	for in, want := range map[string]string{
		"cleanp=2":   `no phase "cleanp"`,
		"cleanup":    "want phase=count",
		"cleanup=0":  "from 1 to 10",
		"cleanup=x":  "from 1 to 10",
		"cleanup=11": "from 1 to 10",
	} {
		if _, err := ParseReviewPolicy(in, phases); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseReviewPolicy(%q) = %v; want an error with %q", in, err, want)
		}
	}
}
