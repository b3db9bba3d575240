package reconciler

// Owners by path: who must approve the plans in which files
// (--owners-file), written like CODEOWNERS.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// Owners say whose approving review the approval of a plan needs, by the
// plan file's path in the repository: rules like CODEOWNERS', the last
// that matches a path winning. The zero value has no rules: no plan has
// owners.
type Owners struct {
	rules []ownerRule
}

type ownerRule struct {
	pattern []string // path segments; "**" matches any number of them
	owners  []string
}

// MaxOwnersSize bounds the owners file ReadOwners reads.
const MaxOwnersSize = 1 << 20

// ReadOwners reads the owners file at name (ParseOwners), at most
// MaxOwnersSize bytes of it.
func ReadOwners(name string) (Owners, error) {
	f, err := os.Open(name)
	if err != nil {
		return Owners{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxOwnersSize+1))
	if err != nil {
		return Owners{}, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxOwnersSize {
		return Owners{}, fmt.Errorf("%s: over %d bytes", name, MaxOwnersSize)
	}
	return ParseOwners(name, data)
}

// ParseOwners reads owners rules, one a line: a pattern, then the forge
// logins of its owners ("alice" or "@alice"), separated by spaces. A
// word that starts with # begins a comment. The pattern is matched against
// the whole path of a plan file from the repository's root, so it has a
// slash ("plans/prod-*.yaml"; a leading one is dropped): each segment as
// path.Match matches it, "**" as a whole segment matching any number of
// segments ("plans/**"), and a trailing slash meaning everything under
// it. A rule without owners takes them away from the files it matches.
// GitHub teams (@org/team) and email addresses are refused: only an
// account's review is asked of the forge. Errors name file (name) and line.
func ParseOwners(name string, data []byte) (Owners, error) {
	var o Owners
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, MaxOwnersSize)
	for n := 1; sc.Scan(); n++ {
		words := strings.Fields(sc.Text())
		for i, w := range words {
			if strings.HasPrefix(w, "#") {
				words = words[:i]
				break
			}
		}
		if len(words) == 0 {
			continue
		}
		r, err := parseOwnerRule(words)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, n, err))
			continue
		}
		o.rules = append(o.rules, r)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	if len(errs) > 0 {
		return Owners{}, errors.Join(errs...) // no rules rather than some
	}
	return o, nil
}

func parseOwnerRule(words []string) (ownerRule, error) {
	pattern := strings.TrimPrefix(words[0], "/")
	if strings.HasSuffix(pattern, "/") {
		pattern += "**"
	}
	if pattern != "**" && !strings.Contains(pattern, "/") {
		// CODEOWNERS matches such a pattern at any depth; here it would
		// match files at the root only, and give no plan owners.
		return ownerRule{}, fmt.Errorf("pattern %q: match the whole path from the repository's root, such as plans/%s", words[0], words[0])
	}
	var r ownerRule
	for _, seg := range strings.Split(pattern, "/") {
		if _, err := path.Match(seg, ""); err != nil || seg == "" || (seg != "**" && strings.Contains(seg, "**")) {
			return ownerRule{}, fmt.Errorf("pattern %q: segment %q is neither a path.Match pattern nor **", words[0], seg)
		}
		if seg == "**" && len(r.pattern) > 0 && r.pattern[len(r.pattern)-1] == "**" {
			continue // one matches what two do, in fewer tries
		}
		r.pattern = append(r.pattern, seg)
	}
	for _, w := range words[1:] {
		login := strings.TrimPrefix(w, "@")
		switch {
		case strings.Contains(login, "/"):
			return ownerRule{}, fmt.Errorf("owner %q: GitHub teams are not supported; name the accounts", w)
		case strings.Contains(login, "@"):
			return ownerRule{}, fmt.Errorf("owner %q: an email address; name the account's login on the forge", w)
		case !isLogin(login):
			return ownerRule{}, fmt.Errorf("owner %q: not a login (letters, digits, -, _ and .)", w)
		}
		r.owners = append(r.owners, login)
	}
	return r, nil
}

// isLogin says whether s can be a GitHub or Gitea login.
func isLogin(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(c rune) bool {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		return !ok
	})
}

// Of returns the owners of the plan file at file, its path in the
// repository ("plans/prod.yaml"): those of the last rule that matches it;
// none when no rule does.
func (o Owners) Of(file string) []string {
	segs := strings.Split(file, "/")
	for i := len(o.rules) - 1; i >= 0; i-- {
		if matchSegments(o.rules[i].pattern, segs) {
			return o.rules[i].owners
		}
	}
	return nil
}

// matchSegments matches a path's segments against a pattern's.
func matchSegments(pattern, name []string) bool {
	for len(pattern) > 0 {
		if pattern[0] == "**" {
			for i := range len(name) + 1 {
				if matchSegments(pattern[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pattern[0], name[0]); !ok {
			return false
		}
		pattern, name = pattern[1:], name[1:]
	}
	return len(name) == 0
}
