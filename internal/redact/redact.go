package redact

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Mask is what a secret, a URL's user information or query string, or a
// secret JSON field's value is replaced with. It is the "***" that
// internal/gitsource's RedactURL has always shown, so that a redacted URL
// reads the same wherever it comes from.
const Mask = "***"

// Scrub returns s with every registered secret (Register) replaced by
// Mask, the value of every JSON field named like a secret ("password",
// "secret", "token", …) replaced by Mask, and every URL's user
// information and query string (and fragment) replaced by Mask:
// "https://user:pa55@keystone/v3?token=x" becomes "https://***@keystone/v3?***".
// Scrubbing scrubbed text changes nothing.
func Scrub(s string) string {
	return scrub(s, nil)
}

// scrub is Scrub with extra values to mask besides the registered ones
// (Error's), each of at least minExtra bytes, in every form it takes when
// quoted. They are masked first, longest first: an extra value may hold a
// registered one (a Secret's clouds.yaml, its password), and masking that
// first would leave the rest of it unmatched.
func scrub(s string, extra []string) string {
	if s == "" {
		return s
	}
	var all []string
	for _, v := range extra {
		if len(v) >= minExtra {
			all = append(all, forms(v)...)
		}
	}
	slices.SortFunc(all, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, f := range all {
		s = strings.ReplaceAll(s, f, Mask)
	}
	if r := global.replacer.Load(); r != nil {
		s = r.Replace(s)
	}
	if strings.IndexByte(s, '"') >= 0 {
		s = secretField.ReplaceAllString(s, `${1}"`+Mask+`"`)
	}
	if strings.Contains(s, "://") {
		s = urlInText.ReplaceAllStringFunc(s, redactMatch)
	}
	return s
}

// secretField matches a JSON string field whose name says it holds a
// secret, up to its value: what an OpenStack service echoes of an
// authentication request ({"password": "..."}, an application
// credential's "secret", a token's "id" is not matched: it is registered
// when ferry has one). Only string values are matched, so that
// Keystone's "password": {"user": …} object is left whole and its inner
// "password" masked.
var secretField = regexp.MustCompile(`(?i)("(?:password|passwd|secret|token|access_token|refresh_token|client_secret|api_key|apikey|application_credential_secret|passphrase|private_key)"\s*:\s*)"(?:[^"\\]|\\.)*"`)

// urlInText matches a URL in free text: a scheme, "://" and everything up
// to white space or a quote. Trailing punctuation is given back by
// redactMatch.
var urlInText = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'<>`]+")

// URL returns raw, a URL, with its user information and its query string
// and fragment replaced by Mask. A string that holds no URL is returned
// as it is.
func URL(raw string) string { return Scrub(raw) }

// redactMatch redacts one URL that urlInText found, leaving the
// punctuation that most likely ends the sentence around it rather than
// the URL ("see https://host/v3." or "[POST https://host/v3]").
func redactMatch(m string) string {
	u, tail := trimPunctuation(m)
	start := strings.Index(u, "://") + len("://")
	end := len(u)
	if i := strings.IndexAny(u[start:], "/?#"); i >= 0 {
		end = start + i
	}
	if at := strings.LastIndexByte(u[start:end], '@'); at >= 0 {
		u = u[:start] + Mask + u[start+at:]
	}
	if q := strings.IndexAny(u[start:], "?#"); q >= 0 && start+q+1 < len(u) {
		u = u[:start+q+1] + Mask
	}
	return u + tail
}

// trimPunctuation splits a URL found in text from the punctuation after
// it: a closing bracket only when the URL does not open it (an IPv6 host
// "http://[::1]:5000" keeps its own).
func trimPunctuation(m string) (url, tail string) {
	end := len(m)
	for end > 0 {
		c := m[end-1]
		switch {
		case strings.IndexByte(".,;:!", c) >= 0:
		case c == ')' && strings.Count(m[:end], "(") < strings.Count(m[:end], ")"):
		case c == ']' && strings.Count(m[:end], "[") < strings.Count(m[:end], "]"):
		case c == '}' && strings.Count(m[:end], "{") < strings.Count(m[:end], "}"):
		default:
			return m[:end], m[end:]
		}
		end--
	}
	return m[:end], m[end:]
}

// Excerpt returns at most n bytes of body, scrubbed, for an error that
// must say what a server answered: an HTTP error body can echo the
// request, password included, and can be of any size. The body is
// scrubbed before it is cut, so that a cut cannot leave the start of a
// secret that Scrub would have recognised whole; the cut falls on a rune
// boundary and is marked with "…". White space is collapsed to single
// spaces, so that the excerpt stays on one log line.
func Excerpt(body []byte, n int) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "\uFFFD")), " ")
	s = Scrub(s)
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if cut < 0 {
		cut = 0
	}
	return s[:cut] + "…"
}
