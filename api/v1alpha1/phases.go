package v1alpha1

// Phase names, in the order they run within their strategy.
const (
	PhaseCluster        = "cluster"
	PhaseControlPlane   = "control-plane"
	PhaseWorkers        = "workers"
	PhaseRollout        = "rollout"
	PhasePrepare        = "prepare"
	PhaseNetworkBridge  = "network-bridge"
	PhaseInfrastructure = "infrastructure"
	PhaseCutover        = "cutover"
	PhaseCleanup        = "cleanup"
)

// Phases returns the phases of the plan's strategy in the order they run.
// Optional phases are included only when the plan asks for them: rollout
// with adopt.rollout, network-bridge with manifests.vpnOverlay or
// replace.gateway.
func (p *MigrationPlan) Phases() []string {
	switch p.Spec.Strategy {
	case StrategyAdopt:
		phases := []string{PhaseCluster, PhaseControlPlane, PhaseWorkers}
		if p.Spec.Adopt != nil && p.Spec.Adopt.Rollout {
			phases = append(phases, PhaseRollout)
		}
		return phases
	case StrategyReplace:
		phases := []string{PhasePrepare}
		if p.HasNetworkBridge() {
			phases = append(phases, PhaseNetworkBridge)
		}
		return append(phases, PhaseInfrastructure, PhaseWorkers, PhaseCutover, PhaseCleanup)
	}
	return nil
}

// PhaseIndex returns the position of phase in the plan's phases, or -1 when
// the strategy has no such phase. The empty phase (nothing approved) is -1.
func (p *MigrationPlan) PhaseIndex(phase string) int {
	for i, name := range p.Phases() {
		if name == phase {
			return i
		}
	}
	return -1
}

// HasNetworkBridge reports whether a replace plan has the network-bridge
// phase: a VPN overlay to apply or a gateway server to build.
func (p *MigrationPlan) HasNetworkBridge() bool {
	vpn := p.Spec.Manifests != nil && len(p.Spec.Manifests.VPNOverlay) > 0
	return vpn || (p.Spec.Replace != nil && p.Spec.Replace.Gateway != nil)
}

// PointOfNoReturn is the phase of the plan's strategy that cannot be
// rolled back, nor can any phase before it once it has begun: cleanup
// deletes the old machines (replace), rollout replaces the adopted
// servers (adopt). Empty when the plan's phases have none.
func (p *MigrationPlan) PointOfNoReturn() string {
	switch p.Spec.Strategy {
	case StrategyAdopt:
		if p.Spec.Adopt != nil && p.Spec.Adopt.Rollout {
			return PhaseRollout
		}
	case StrategyReplace:
		return PhaseCleanup
	}
	return ""
}

// RollbackTo is the index in Phases of the last phase a rollback keeps:
// -1 for none; ok is false without a rollback.
func (p *MigrationPlan) RollbackTo() (index int, ok bool) {
	if p.Spec.Rollback == nil {
		return 0, false
	}
	if p.Spec.Rollback.To == RollbackNone {
		return -1, true
	}
	return p.PhaseIndex(p.Spec.Rollback.To), true
}
