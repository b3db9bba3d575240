package observed

import "slices"

// AdoptSecrets are the suffixes of the Secrets <cluster>-<suffix> a running
// kubeadm cluster is adopted with; regenerating any of them would cut the
// running nodes off (a new CA, new SA keys), and Cluster API's
// KubeadmControlPlane generates each one that is missing. Without the
// front-proxy CA (-proxy), a control-plane node it builds later would
// trust another aggregation-layer CA than the running ones.
var AdoptSecrets = []string{"kubeconfig", "etcd", "ca", "sa", "proxy"}

// ExternalEtcdSecret is the suffix of the API server's client certificate
// for an external etcd, which a cluster with one is adopted with too:
// KubeadmControlPlane cannot generate it and stops without it.
const ExternalEtcdSecret = "apiserver-etcd-client"

// SecretSuffixes are the suffixes of every Secret <cluster>-<suffix> the
// observer reads for an adoption.
var SecretSuffixes = slices.Clip(append(slices.Clone(AdoptSecrets), ExternalEtcdSecret))

// Secret returns the Secret namespace/name, or nil.
func (s *Snapshot) Secret(namespace, name string) *Secret {
	for i := range s.Secrets {
		if s.Secrets[i].Namespace == namespace && s.Secrets[i].Name == name {
			return &s.Secrets[i]
		}
	}
	return nil
}

// HasSecretKey reports whether Secret namespace/name exists with key.
func (s *Snapshot) HasSecretKey(namespace, name, key string) bool {
	sec := s.Secret(namespace, name)
	return sec != nil && slices.Contains(sec.Keys, key)
}

// Machine returns the Machine name, or nil.
func (s *Snapshot) Machine(name string) *Machine {
	for i := range s.Machines {
		if s.Machines[i].Name == name {
			return &s.Machines[i]
		}
	}
	return nil
}

// MachineDeployment returns the MachineDeployment name, or nil.
func (s *Snapshot) MachineDeployment(name string) *MachineDeployment {
	for i := range s.MachineDeployments {
		if s.MachineDeployments[i].Name == name {
			return &s.MachineDeployments[i]
		}
	}
	return nil
}

// MachineSetsOf returns the MachineSets a MachineDeployment owns.
func (s *Snapshot) MachineSetsOf(deployment string) []*MachineSet {
	var out []*MachineSet
	for i := range s.MachineSets {
		if s.MachineSets[i].Deployment == deployment {
			out = append(out, &s.MachineSets[i])
		}
	}
	return out
}

// MachinesOf returns the Machines a MachineDeployment owns.
func (s *Snapshot) MachinesOf(deployment string) []*Machine {
	var out []*Machine
	for i := range s.Machines {
		if s.Machines[i].Deployment == deployment {
			out = append(out, &s.Machines[i])
		}
	}
	return out
}

// Node returns the workload cluster's node name, or nil.
func (s *Snapshot) Node(name string) *Node {
	if s.Workload == nil {
		return nil
	}
	for i := range s.Workload.Nodes {
		if s.Workload.Nodes[i].Name == name {
			return &s.Workload.Nodes[i]
		}
	}
	return nil
}

// Manifest returns the state of a manifest path in the workload cluster.
func (s *Snapshot) Manifest(path string) Manifest {
	if s.Workload == nil {
		return Manifest{}
	}
	return s.Workload.Manifests[path]
}

// Checked reports whether the one-shot check with a step key passed.
func (s *Snapshot) Checked(key string) bool {
	return slices.Contains(s.Record.Checks, key)
}

// Gateway returns the observed OpenStackServer name, or nil.
func (s *Snapshot) Gateway(name string) *OpenStackServer {
	for i := range s.Gateways {
		if s.Gateways[i].Name == name {
			return &s.Gateways[i]
		}
	}
	return nil
}

// CreatedIn returns the objects ferry created in phase, in the order of
// Created.
func (s *Snapshot) CreatedIn(phase string) []Created {
	var out []Created
	for _, c := range s.Created {
		if c.Phase == phase {
			out = append(out, c)
		}
	}
	return out
}

// IsCreated reports whether ferry created the object kind/name.
func (s *Snapshot) IsCreated(kind, name string) bool {
	return slices.ContainsFunc(s.Created, func(c Created) bool { return c.Kind == kind && c.Name == name })
}
