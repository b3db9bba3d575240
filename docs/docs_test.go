package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// link is a Markdown link's target, outside code.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link of the README and the docs names a
// file of the repository, and every #anchor a heading of its page.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"), filepath.Join("..", "CONTRIBUTING.md"))
	if len(pages) < 10 {
		t.Fatalf("found %d pages, want the README and the docs", len(pages))
	}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(withoutCode(string(text)), "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %s: no file %s", page, i+1, target, path)
					continue
				}
				if anchor != "" && !hasAnchor(t, path, anchor) {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", page, i+1, target, path, anchor)
				}
			}
		}
	}
}

// withoutCode blanks fenced code blocks and inline code, keeping the
// line numbers: a link in code is an example, not a link.
func withoutCode(s string) string {
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(withoutFences(s), "")
}

// hasAnchor reports whether the Markdown file at path has a heading whose
// GitHub anchor is anchor.
func hasAnchor(t *testing.T, path, anchor string) bool {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(withoutFences(string(text)), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") && slug(h) == anchor {
			return true
		}
	}
	return false
}

// withoutFences blanks fenced code blocks only: headings keep their
// inline code, which counts in their anchors.
func withoutFences(s string) string {
	lines := strings.Split(s, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// slug is GitHub's anchor of a heading: lower case, punctuation other
// than hyphens and underscores dropped, spaces turned into hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
