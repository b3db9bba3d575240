package testenv

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
)

// SecretForms returns v and the forms it takes once quoted into text, for
// a test that looks for a planted secret in what ferry wrote: escaped for
// a JSON string, a URL's query or path and Go's %q, and base64-encoded.
// Base64 is looked for at each of the three alignments v can have inside
// a longer encoded text (a Kubernetes Secret's data that holds v among
// other lines, a basic-auth header "user:v"), each cut to the characters
// that v's bytes alone decide; a v shorter than 4 bytes has no such
// characters at some alignments and is looked for as it is only.
func SecretForms(v string) []string {
	js, _ := json.Marshal(v)
	q := strconv.Quote(v)
	out := []string{v, string(js[1 : len(js)-1]), url.QueryEscape(v), url.PathEscape(v), q[1 : len(q)-1]}
	if len(v) >= 4 {
		for shift := range 3 {
			enc := base64.StdEncoding.EncodeToString(append(make([]byte, shift), v...))
			// The first shift bytes decide the first 0, 2 or 3
			// characters, wholly or in part; the characters after the
			// last whole 6 bits of v depend on what follows it.
			start := (shift*8 + 5) / 6
			end := (shift + len(v)) * 8 / 6
			out = append(out, enc[start:end])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
