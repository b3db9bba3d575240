package gitsource_test

import (
	"testing"

	"github.com/ferry-dev/ferry/internal/gitsource"
)

// TestRedactURL covers the URL forms a plans repository is given in.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://github.com/org/plans.git", "https://github.com/org/plans.git"},
		{"https://user:tok3n@github.com/org/plans.git", "https://***@github.com/org/plans.git"},
		{"https://ghp_tok3n@github.com/org/plans.git", "https://***@github.com/org/plans.git"},
		{"http://user:tok3n@127.0.0.1:8080/plans.git", "http://***@127.0.0.1:8080/plans.git"},
		{"https://gitlab.example/org/plans.git?private_token=tok3n", "https://gitlab.example/org/plans.git?***"},
		{"ssh://git@github.com/org/plans.git", "ssh://git@github.com/org/plans.git"},
		{"ssh://git:pa55@github.com:2222/org/plans.git", "ssh://git@github.com:2222/org/plans.git"},
		{"git@github.com:org/plans.git", "ssh://git@github.com/org/plans.git"},
		{"file:///srv/git/plans.git", "file:///srv/git/plans.git"},
		{"/srv/git/plans.git", "file:///srv/git/plans.git"},
		{"https://user:tok3n@exa mple.com/%zz", "<unparsable URL>"},
	} {
		if got := gitsource.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
