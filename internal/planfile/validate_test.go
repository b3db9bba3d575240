package planfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestIdentitySourceNotFerrysOwn: spec.target.identity.from may not name
// a Secret ferry reads for itself, in any namespace (issue 34); the
// example plans' ferry-system/openstack-credentials stays valid.
func TestIdentitySourceNotFerrysOwn(t *testing.T) {
	const from = "      from:\n        name: openstack-credentials\n"
	refused := func(name string) string {
		return `plans/shop.yaml:16: spec.target.identity.from.name: "` + name + `" is a Secret ferry reads for itself (deploy/ mounts it into ferry's pods): ` +
			"its keys are ferry's own credentials, and identity.from copies keys into the cluster's namespace; " +
			"name the Secret that holds the cloud's clouds.yaml (the example plans use ferry-system/openstack-credentials)"
	}
	for _, tc := range []struct {
		name string
		from string
		want []string
	}{{
		name: "ferry's credentials, for its forge token",
		from: "      from:\n        namespace: ferry-system\n        name: ferry-credentials\n        cloudsKey: forge-token\n",
		want: []string{refused("ferry-credentials")},
	}, {
		name: "ferry's credentials in another namespace",
		from: "      from:\n        namespace: tenants\n        name: ferry-credentials\n",
		want: []string{refused("ferry-credentials")},
	}, {
		name: "ferry's NATS credentials, in the cluster's namespace",
		from: "      from:\n        name: ferry-nats\n        cloudsKey: nats.creds\n",
		want: []string{refused("ferry-nats")},
	}, {
		name: "the example plans' Secret",
		from: "      from:\n        namespace: ferry-system\n        name: openstack-credentials\n        caCertKey: cacert\n",
	}, {
		name: "a name that only begins like ferry's",
		from: "      from:\n        namespace: ferry-system\n        name: ferry-credentials-openstack\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// The name is on line 16 when a namespace comes first, and on
			// line 15 when it does not.
			want := tc.want
			if !strings.Contains(tc.from, "namespace:") {
				for i := range want {
					want[i] = strings.Replace(want[i], "shop.yaml:16:", "shop.yaml:15:", 1)
				}
			}
			got := decodeErrors(t, edit(t, replacePlan, from, tc.from))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("Decode errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestOwnSecretsAreDeploys: every Secret deploy/ gives ferry's pods (a
// volume's secretName, an env's secretKeyRef, an envFrom's secretRef,
// kustomize patches included) is in ownSecrets, so that a Secret added
// there is refused as an identity source too.
func TestOwnSecretsAreDeploys(t *testing.T) {
	var found []string
	err := filepath.WalkDir("../../deploy", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := yaml.NewDecoder(f)
		for {
			var doc any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
			found = append(found, secretNames(doc)...)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(found, "ferry-credentials") {
		t.Fatalf("found Secrets %v in deploy/, not ferry-credentials: the walk misses how deploy/ names them", found)
	}
	for _, name := range found {
		if !slices.Contains(ownSecrets, name) {
			t.Errorf("deploy/ gives ferry's pods Secret %s, which ownSecrets lacks: a plan could copy it with identity.from", name)
		}
	}
}

// secretNames are the Secrets a decoded YAML document mounts or reads.
func secretNames(doc any) []string {
	var out []string
	switch v := doc.(type) {
	case map[string]any:
		for k, e := range v {
			switch k {
			case "secretName":
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			case "secretKeyRef", "secretRef":
				if m, ok := e.(map[string]any); ok {
					if s, ok := m["name"].(string); ok {
						out = append(out, s)
					}
				}
			}
			out = append(out, secretNames(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, secretNames(e)...)
		}
	}
	return out
}
