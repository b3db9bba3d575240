package planfile

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// schemaFile is the JSON Schema generated from the plan types.
const schemaFile = "../../api/v1alpha1/migrationplan.schema.json"

// The JSON Schema that editors check plans with writes each format as a
// pattern; it must never reject what the decoder accepts. For the DNS
// formats it must agree exactly. For durations and URLs it may accept more
// (0s, a URL without a host): a regular expression cannot say
// "positive" or parse a URL, and the decoder is the authority.
func TestSchemaFormatsAgreeWithDecoder(t *testing.T) {
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Pattern   string `json:"pattern"`
				MaxLength int    `json:"maxLength"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}

	inputs := map[string][]string{
		"dns1123-subdomain": {
			"a", "0", "shop", "a-b", "a.b", "a-b.c-d", "a1.b2.c3",
			"", "A", "Shop", "a_b", "-a", "a-", "a..b", ".a", "a.", "a b", "ä", "a/b",
			strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
			strings.Repeat("a", 63) + "." + strings.Repeat("b", 63),
		},
		"dns1123-label": {
			"a", "0", "a-b", "tenants", "kube-system",
			"", "a.b", "A", "-a", "a-", "a_b", "a b",
			strings.Repeat("a", 63), strings.Repeat("a", 64),
		},
		"duration": {
			"90s", "10m", "1h30m", "1.5h", ".5s", "1.s", "+1m", "1µs", "1μs", "1us", "300ms", "2h45m30.5s",
			"0", "0s", "-1m", "10", "m", "1d", "1 m", "", "1m ", " 1m", "1M", "1h-30m", ".s", "99999999999h",
		},
		"url": {
			"https://shop.example.com/healthz", "http://10.0.0.1:8080/", "HTTPS://SHOP.EXAMPLE.COM", "http://a",
			"ftp://shop.example.com", "shop.example.com", "//shop.example.com", "https://", "https:shop", "", "mailto:a@b",
		},
	}
	exact := map[string]bool{"dns1123-subdomain": true, "dns1123-label": true}

	found := map[string]bool{}
	for _, st := range structTypes(reflect.TypeFor[v1alpha1.MigrationPlan]()) {
		for i := 0; i < st.NumField(); i++ {
			f := st.Field(i)
			format := v1alpha1.FieldRules(f).Format
			if format == "" {
				continue
			}
			found[format] = true
			name, _ := v1alpha1.JSONName(f)
			prop, ok := schema.Defs[st.Name()].Properties[name]
			if !ok || prop.Pattern == "" {
				t.Errorf("%s.%s has format %s but no pattern in %s", st.Name(), f.Name, format, schemaFile)
				continue
			}
			pattern, err := regexp.Compile(prop.Pattern)
			if err != nil {
				t.Errorf("%s.%s: pattern %q: %v", st.Name(), f.Name, prop.Pattern, err)
				continue
			}
			for _, s := range inputs[format] {
				if s == "" {
					continue // empty means "not set"; the decoder skips the format
				}
				decoderOK := checkFormat(format, s) == ""
				schemaOK := pattern.MatchString(s) && (prop.MaxLength == 0 || len([]rune(s)) <= prop.MaxLength)
				if decoderOK && !schemaOK {
					t.Errorf("%s.%s (%s): the schema rejects %q, which the decoder accepts", st.Name(), f.Name, format, s)
				}
				if exact[format] && schemaOK && !decoderOK {
					t.Errorf("%s.%s (%s): the schema accepts %q, which the decoder rejects", st.Name(), f.Name, format, s)
				}
			}
		}
	}
	for format := range inputs {
		if !found[format] {
			t.Errorf("no field of the plan has format %s; the test checks nothing for it", format)
		}
	}
}

// structTypes returns the struct types a value of t contains, t first.
func structTypes(t reflect.Type) []reflect.Type {
	var out []reflect.Type
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		out = append(out, t)
		for i := 0; i < t.NumField(); i++ {
			walk(t.Field(i).Type)
		}
	}
	walk(t)
	return out
}
