// Who ferry is on the forge: the account its token authenticates as, the
// author of every comment ferry writes.

package forge

import "strings"

// SameLogin reports whether two logins name the same account. GitHub and
// Gitea logins ignore case (an account is found under any spelling of its
// name), so an author compared with ferry's login is compared without it.
func SameLogin(a, b string) bool { return a != "" && strings.EqualFold(a, b) }
