package planfile

import (
	"fmt"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// checkFormat checks s against a named format and returns what is wrong,
// or "" when it is well formed.
func checkFormat(format, s string) string {
	switch format {
	case "dns1123-subdomain":
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return fmt.Sprintf("%q is not a valid Kubernetes name: expected lower-case letters, digits, '-' and '.', "+
				"starting and ending with a letter or digit, at most %d characters", s, validation.DNS1123SubdomainMaxLength)
		}
	case "dns1123-label":
		if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
			return fmt.Sprintf("%q is not a valid Kubernetes name: expected lower-case letters, digits and '-', "+
				"starting and ending with a letter or digit, at most %d characters", s, validation.DNS1123LabelMaxLength)
		}
	case "duration":
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Sprintf("expected a duration like 90s, 10m or 1h30m, got %q", s)
		}
		if d <= 0 {
			return fmt.Sprintf("must be a positive duration, got %q", s)
		}
	case "url":
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Sprintf("expected an http:// or https:// URL, got %q", s)
		}
	default:
		panic("planfile: unknown format " + format)
	}
	return ""
}
