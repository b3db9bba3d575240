package openstack

import (
	"strings"
	"testing"
)

// parseClouds is the one piece of Connect that needs no cloud: these cases
// pin how a CAPO identity Secret's clouds.yaml is read.
func TestParseClouds(t *testing.T) {
	const yaml = `clouds:
  openstack:
    auth:
      auth_url: https://keystone.example.com:5000/v3
      username: capo
      password: not-shown-anywhere
      project_name: k8s
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionTwo
    cacert: /etc/certs/cacert
  other:
    auth:
      auth_url: https://other.example.com/v3
`
	opts, eo, tlsConfig, err := parseClouds(Credentials{CloudsYAML: []byte(yaml), Cloud: "openstack"})
	if err != nil {
		// The cacert path names a file on another machine and is ignored.
		t.Fatalf("parseClouds: %v", err)
	}
	if opts.IdentityEndpoint != "https://keystone.example.com:5000/v3" || opts.Username != "capo" || eo.Region != "RegionTwo" || tlsConfig.RootCAs != nil {
		t.Errorf("parsed %+v, region %q, roots %v", opts, eo.Region, tlsConfig.RootCAs)
	}

	for _, tc := range []struct {
		creds Credentials
		want  string
	}{
		{Credentials{CloudsYAML: []byte(yaml), Cloud: "missing"}, "no such cloud; clouds.yaml has ["},
		{Credentials{CloudsYAML: []byte("clouds: [1, 2"), Cloud: "openstack"}, "clouds.yaml is not valid YAML"},
		{Credentials{CloudsYAML: []byte(yaml), Cloud: "openstack", CACert: []byte("not PEM")}, "the cacert key holds no PEM certificate"},
	} {
		_, _, _, err := parseClouds(tc.creds)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseClouds(cloud %q) = %v, want an error containing %q", tc.creds.Cloud, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "not-shown-anywhere") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestPlanTag(t *testing.T) {
	if got := PlanTag("capi-quickstart"); got != "ferry-plan=capi-quickstart" {
		t.Errorf("PlanTag = %q", got)
	}
	long := strings.Repeat("a", 100)
	if got := PlanTag(long); len(got) > 60 || got == PlanTag(long+"b") {
		t.Errorf("PlanTag(long) = %q: longer than Nova's 60 or not distinct", got)
	}
}
