package v1alpha1

// Default values, applied by Default and shown by `reconciler plan`.
const (
	DefaultNamespace     = "default"
	DefaultCloudName     = "openstack"
	DefaultCloudsKey     = "clouds.yaml"
	DefaultFailureDomain = "nova"
	DefaultDrainTimeout  = "10m"
	DefaultWaitTimeout   = "30m"
	DefaultEtherType     = "IPv4"
	DefaultCNI           = "other"
)

// KamajiPreferredAddressTypes is the kubelet address order a hosted control
// plane needs: the workers' host names do not resolve from where it runs.
var KamajiPreferredAddressTypes = []string{"InternalIP", "ExternalIP", "Hostname"}

// Default fills every field that has a default, in place. It is the only
// place defaults are set; a field the plan sets is never changed.
func Default(p *MigrationPlan) {
	s := &p.Spec
	setDefault(&s.Cluster.Namespace, DefaultNamespace)
	setDefault(&s.Target.Identity.SecretName, s.Cluster.Name+"-cloud-config")
	setDefault(&s.Target.Identity.CloudName, DefaultCloudName)
	if from := s.Target.Identity.From; from != nil {
		setDefault(&from.Namespace, s.Cluster.Namespace)
		setDefault(&from.CloudsKey, DefaultCloudsKey)
	}
	setDefault(&s.Target.FailureDomain, DefaultFailureDomain)
	setDefault(&s.Target.CNI, DefaultCNI)
	setDefault(&s.Target.ControlPlane.Name, s.Cluster.Name+"-control-plane")
	for i := range s.Target.Workers {
		setDefault(&s.Target.Workers[i].FailureDomain, s.Target.FailureDomain)
	}

	// The running cluster's endpoint is kept as it is: CAPO creates neither
	// a load balancer nor a floating IP unless the plan asks. A load
	// balancer that CAPO builds for a running cluster takes over the
	// endpoint's address before it has a member (an outage); a hosted
	// control plane owns its endpoint (seed 004).
	kamaji := s.Target.ControlPlane.Provider == ProviderKamaji
	if s.Target.APIServer == nil {
		s.Target.APIServer = &APIServer{}
	}
	setDefaultBool(&s.Target.APIServer.LoadBalancer, false)
	setDefaultBool(&s.Target.APIServer.FloatingIP, false)
	if kamaji {
		if s.Target.ControlPlane.Kubelet == nil {
			s.Target.ControlPlane.Kubelet = &Kubelet{}
		}
		if len(s.Target.ControlPlane.Kubelet.PreferredAddressTypes) == 0 {
			s.Target.ControlPlane.Kubelet.PreferredAddressTypes = append([]string(nil), KamajiPreferredAddressTypes...)
		}
		// No control-plane nodes: the manifest's own selector (upstream's
		// picks control-plane nodes) would never schedule; none is the
		// default, as `nodeSelector: {}` says.
		if m := s.Manifests; m != nil && m.CloudControllerManager != nil && m.CloudControllerManager.NodeSelector == nil {
			m.CloudControllerManager.NodeSelector = map[string]string{}
		}
	}
	if sg := s.Target.SecurityGroups; sg != nil {
		for i := range sg.AllNodesRules {
			setDefault(&sg.AllNodesRules[i].EtherType, DefaultEtherType)
		}
	}

	if s.Strategy == StrategyReplace {
		if s.Cutover == nil {
			s.Cutover = &Cutover{}
		}
		setDefault(&s.Cutover.DrainTimeout, DefaultDrainTimeout)
	}
	if s.Timeouts == nil {
		s.Timeouts = &Timeouts{}
	}
	setDefault(&s.Timeouts.Wait, DefaultWaitTimeout)
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}

func setDefaultBool(field **bool, value bool) {
	if *field == nil {
		*field = &value
	}
}
