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
// machines of plan p, or "" when it covers them; flavors for which known
// returns false are left out.
func QuotaShortfall(ctx context.Context, api QuotaAPI, p *v1alpha1.MigrationPlan, known func(flavor string) bool) (string, error) {
	var need Need
	for _, w := range p.Spec.Target.Workers {
		if !known(w.Flavor) {
			continue
		}
		vcpus, ram, err := api.FlavorSize(ctx, w.Flavor)
		if err != nil {
			return "", err
		}
		n := w.Replicas
		if p.Spec.Strategy == v1alpha1.StrategyAdopt {
			n = 1
		}
		need.Instances += n
		need.Cores += n * vcpus
		need.RAMMiB += n * ram
	}
	return api.Shortfall(ctx, need)
}
