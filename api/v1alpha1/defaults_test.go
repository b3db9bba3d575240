package v1alpha1

import "testing"

// TestDefaultsKamajiCCM: with KamajiControlPlane, a cloud controller
// manager without a nodeSelector gets none (an empty one), so the
// manifest's control-plane selector is not kept; with
// KubeadmControlPlane, unset keeps the manifest's; a selector the plan
// gives stays.
func TestDefaultsKamajiCCM(t *testing.T) {
	for _, tc := range []struct {
		provider string
		given    map[string]string
		wantNil  bool
		wantLen  int
	}{
		{provider: ProviderKamaji, given: nil, wantNil: false, wantLen: 0},
		{provider: ProviderKamaji, given: map[string]string{"pool": "infra"}, wantLen: 1},
		{provider: ProviderKubeadm, given: nil, wantNil: true},
	} {
		p := &MigrationPlan{Spec: Spec{
			Target:    Target{ControlPlane: ControlPlane{Provider: tc.provider}},
			Manifests: &Manifests{CloudControllerManager: &CloudControllerManager{Path: "ccm.yaml", NodeSelector: tc.given}},
		}}
		Default(p)
		got := p.Spec.Manifests.CloudControllerManager.NodeSelector
		if (got == nil) != tc.wantNil || len(got) != tc.wantLen {
			t.Errorf("%s with nodeSelector %v: defaulted to %#v", tc.provider, tc.given, got)
		}
	}
}
