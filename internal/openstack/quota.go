package openstack

import (
	"context"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// QuotaAPI is what a quota check needs of an OpenStack client.
type QuotaAPI interface {
	FlavorSize(ctx context.Context, name string) (vcpus, ramMiB int, err error)
	Shortfall(ctx context.Context, need Need) (string, error)
}

// QuotaShortfall says what the project's compute quota lacks for the new
// machines (a plan's NewMachines), or "" when it covers them; flavors for
// which known returns false are left out.
func QuotaShortfall(ctx context.Context, api QuotaAPI, machines []v1alpha1.Machines, known func(flavor string) bool) (string, error) {
	var need Need
	for _, m := range machines {
		if !known(m.Flavor) {
			continue
		}
		vcpus, ram, err := api.FlavorSize(ctx, m.Flavor)
		if err != nil {
			return "", err
		}
		n := m.Count
		need.Instances += n
		need.Cores += n * vcpus
		need.RAMMiB += n * ram
	}
	return api.Shortfall(ctx, need)
}
