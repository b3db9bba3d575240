package redact

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// MinLen is the shortest value Register keeps: a shorter one would mask
// ordinary words and numbers wherever they appear.
const MinLen = 6

// minExtra is the shortest value Error masks of those it is given for one
// error: they are known to be in play, so a shorter one is masked too,
// though not below 4 bytes, which no real token is
// (internal/gitsource's rule before this package).
const minExtra = 4

// maxValues bounds the registry. Credentials are read again for each
// step, so a rotated password adds a value; past the bound the oldest
// go first, which are the ones least likely to be still in use.
const maxValues = 1024

// registry is the set of secret values and the Replacer built from them.
type registry struct {
	mu     sync.Mutex
	seen   map[string]bool
	values []string // oldest first
	// replacer is read without the lock by every Scrub; nil while nothing
	// is registered.
	replacer atomic.Pointer[strings.Replacer]
}

var global registry

// Register adds secret values to the process's registry, and the forms
// they take when quoted into text: escaped for a URL's query or path, for
// a JSON string (as gophercloud sends a password) and for Go's %q, and
// base64-encoded, whole or inside a longer encoded text (inBase64), as a
// Kubernetes object quoted in an error carries a Secret's data (a value with white space around it, as read from a file,
// also as it was read). Values shorter than MinLen, after trimming white
// space, are ignored. It is cheap to call again with values already
// registered: only a new value rebuilds the Replacer.
func Register(values ...string) {
	var add []string
	for _, raw := range values {
		v := strings.TrimSpace(raw)
		if len(v) < MinLen {
			continue
		}
		add = append(add, forms(v)...)
		if raw != v {
			add = append(add, base64.StdEncoding.EncodeToString([]byte(raw)))
		}
	}
	if len(add) == 0 {
		return
	}
	global.add(add)
}

// forms returns v and each different form it takes when quoted.
func forms(v string) []string {
	out := []string{v}
	js, _ := json.Marshal(v)
	q := strconv.Quote(v)
	quoted := []string{url.QueryEscape(v), url.PathEscape(v), string(js[1 : len(js)-1]), q[1 : len(q)-1], base64.StdEncoding.EncodeToString([]byte(v))}
	for _, f := range append(quoted, inBase64(v)...) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// inBase64 returns the characters that v's bytes alone decide when v is
// inside a longer text encoded in base64, at each of the three offsets it
// may start at modulo 3: a password in a clouds.yaml that a refusal
// quotes as the Secret's data. The characters at either end, which bytes
// before or after v share, are left out.
func inBase64(v string) []string {
	var out []string
	for offset := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, offset), v...))
		first := []int{0, 2, 3}[offset] // characters holding bits of the offset's bytes
		last := (offset + len(v)) * 8 / 6
		if last-first >= 4 {
			out = append(out, enc[first:last])
		}
	}
	return out
}

func (r *registry) add(values []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	changed := false
	for _, v := range values {
		if !r.seen[v] {
			r.seen[v] = true
			r.values = append(r.values, v)
			changed = true
		}
	}
	if !changed {
		return
	}
	for len(r.values) > maxValues {
		delete(r.seen, r.values[0])
		r.values = r.values[1:]
	}
	// strings.Replacer tries the old strings in argument order at each
	// position: longest first, so that a secret that contains another
	// is masked whole.
	sorted := slices.Clone(r.values)
	slices.SortFunc(sorted, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(sorted))
	for _, v := range sorted {
		pairs = append(pairs, v, Mask)
	}
	r.replacer.Store(strings.NewReplacer(pairs...))
}

// reset empties the registry, for this package's tests.
func (r *registry) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen, r.values = nil, nil
	r.replacer.Store(nil)
}
