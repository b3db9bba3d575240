package ostest

import "testing"

// TestNormalizerWholeAddresses: the fixture's addresses are named only
// where they stand whole, never as the start of a longer address a new
// port got (which differs between runs and is left for the caller).
func TestNormalizerWholeAddresses(t *testing.T) {
	a := &Adoptable{Fixture: &Fixture{Suffix: "153b38", Addresses: map[string]string{"tenant-a-md-0-b-153b38": "10.0.0.1"}}}
	norm := a.normalizer(&project{})
	for in, want := range map[string]string{
		"ips [10.0.0.1]":           "ips [<ip tenant-a-md-0-b-<suffix>>]",
		"ips [10.0.0.17]":          "ips [10.0.0.17]",
		"host 10.0.0.1:6443":       "host <ip tenant-a-md-0-b-<suffix>>:6443",
		"server tenant-a-153b38":   "server tenant-a-<suffix>",
		"ips [110.0.0.1 10.0.0.1]": "ips [110.0.0.1 <ip tenant-a-md-0-b-<suffix>>]",
	} {
		if got := norm(in); got != want {
			t.Errorf("normalize %q = %q, want %q", in, got, want)
		}
	}
}
