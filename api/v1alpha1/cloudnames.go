package v1alpha1

import "sort"

// CloudName is an OpenStack resource a plan names, to be resolved to an ID.
type CloudName struct {
	// Kind is flavor, image, network, externalNetwork or subnet.
	Kind string `json:"kind"`
	// Name is the resource's name.
	Name string `json:"name"`
}

// Key renders the name as "<kind>/<name>".
func (n CloudName) Key() string { return n.Kind + "/" + n.Name }

// CloudNames lists, sorted and without repeats, the OpenStack resources the
// plan names by name (those named by ID need no look-up): its networks,
// subnets, and the flavors and images of its machines and gateway.
func (p *MigrationPlan) CloudNames() []CloudName {
	t := p.Spec.Target
	set := map[CloudName]bool{}
	add := func(kind, name string) {
		if name != "" {
			set[CloudName{Kind: kind, Name: name}] = true
		}
	}
	add("network", t.Network.Name)
	if t.ExternalNetwork != nil {
		add("externalNetwork", t.ExternalNetwork.Name)
	}
	for _, s := range t.Subnets {
		add("subnet", s.Name)
	}
	if t.ControlPlane.Provider == ProviderKubeadm {
		add("flavor", t.ControlPlane.Flavor)
		add("image", t.ControlPlane.Image)
	}
	for _, w := range t.Workers {
		add("flavor", w.Flavor)
		add("image", w.Image)
	}
	if r := p.Spec.Replace; r != nil && r.Gateway != nil {
		add("flavor", r.Gateway.Flavor)
		add("image", r.Gateway.Image)
		if r.Gateway.Network != nil {
			add("network", r.Gateway.Network.Name)
		}
	}
	names := make([]CloudName, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Key() < names[j].Key() })
	return names
}

// Machines is a number of new machines of one flavor.
type Machines struct {
	Flavor string `json:"flavor"`
	Count  int    `json:"count"`
}

// NewMachines lists, by worker pool, the new machines the project's
// quota must have room for: each pool's replicas with the replace
// strategy, which creates them; one of each pool with adopt, whose rollout
// replaces machines one at a time and needs one more at most.
func (p *MigrationPlan) NewMachines() []Machines {
	var out []Machines
	for _, w := range p.Spec.Target.Workers {
		n := w.Replicas
		if p.Spec.Strategy == StrategyAdopt {
			n = 1
		}
		out = append(out, Machines{Flavor: w.Flavor, Count: n})
	}
	return out
}
