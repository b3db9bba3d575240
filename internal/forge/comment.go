package forge

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxCommentLength is GitHub's limit on a comment body, in characters.
// Bodies are measured here in bytes, which is never less than the count in
// characters or in UTF-16 units, so a body within it is within GitHub's
// limit however GitHub counts.
const MaxCommentLength = 65536

// truncateReserve is what a cut body keeps free below MaxCommentLength for
// a closing code fence and the note that says what was cut.
const truncateReserve = 512

// Marker is the hidden HTML comment by which ferry recognises its own comment
// for key on a pull request. It opens every body that ferry posts.
func Marker(key string) string { return "<!-- ferry:" + key + " -->" }

// Comment frames a comment body that the reconciler rendered: the marker for
// key, a header with title (none when title is empty: body brings its own),
// body, and a footer that says ferry keeps the comment current. The result
// depends on its arguments only, for golden tests. title is kept to one
// line.
func Comment(key, title, body string) string {
	var b strings.Builder
	b.WriteString(Marker(key))
	b.WriteString("\n")
	if title = strings.Join(strings.Fields(title), " "); title != "" {
		b.WriteString("### " + title + "\n\n")
	}
	if body = strings.TrimRight(body, "\n"); body != "" {
		b.WriteString(body)
		b.WriteString("\n\n")
	}
	b.WriteString("<sub>ferry keeps this comment up to date, editing it in place; changes made to it by hand are overwritten.</sub>\n")
	return b.String()
}

// checkKey rejects keys that could end the marker's HTML comment early or
// span lines, which would make the marker unfindable.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("comment key is empty")
	}
	if strings.Contains(key, "--") {
		return fmt.Errorf("comment key %q contains --", key)
	}
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._/:-", r):
		default:
			return fmt.Errorf("comment key %q: %q is not a letter, digit or one of . _ / : -", key, r)
		}
	}
	return nil
}

// frameBody makes body the one ferry posts for key: with the marker as its
// first line, and within MaxCommentLength.
func frameBody(key, body string) string {
	if m := Marker(key); !strings.HasPrefix(body, m) {
		body = m + "\n" + body
	}
	return truncateComment(body, MaxCommentLength)
}

// truncateComment cuts body to fit in limit bytes. It cuts at the end of a
// line (inside a single overlong line, at a character boundary), keeps the
// first line (the marker), closes a code block left open by the cut, so the
// note does not render as code, and ends with a note saying how much was cut.
// Bodies that fit are returned unchanged.
func truncateComment(body string, limit int) string {
	if len(body) <= limit {
		return body
	}
	end := limit - truncateReserve
	firstLine := strings.IndexByte(body, '\n') + 1
	n := strings.LastIndexByte(body[:end], '\n') + 1
	if n <= firstLine {
		// No line ends between the marker and the limit: cut inside the line.
		n = end
		for n > 0 && !utf8.RuneStart(body[n]) {
			n--
		}
	}
	kept, cut := body[:n], body[n:]
	var b strings.Builder
	b.WriteString(kept)
	if !strings.HasSuffix(kept, "\n") {
		b.WriteString("\n")
	}
	if fence := openFence(kept); fence != "" {
		b.WriteString(fence + "\n")
	}
	lines := strings.Count(strings.TrimRight(cut, "\n"), "\n") + 1
	fmt.Fprintf(&b, "\n> [!NOTE]\n> ferry cut this comment to stay under GitHub's limit of %d characters: %d more lines (%d characters) are not shown.\n",
		MaxCommentLength, lines, utf8.RuneCountInString(cut))
	return b.String()
}

// openFence returns the fence (``` or ~~~) of the code block that text ends
// inside, or "" when it ends outside any.
func openFence(text string) string {
	open := ""
	for line := range strings.Lines(text) {
		t := strings.TrimLeft(line, " ")
		if len(line)-len(t) > 3 {
			continue
		}
		switch {
		case open == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			open = t[:3]
		case open != "" && strings.HasPrefix(t, open):
			open = ""
		}
	}
	return open
}
