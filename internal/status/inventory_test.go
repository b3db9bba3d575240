package status_test

import (
	"slices"
	"testing"

	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/statustest"
)

// TestInventory: the cleanup's inventory is recorded, kept across
// plannings, and an item the planner no longer lists that was to be
// removed is recorded as removed; a user's resource stays "left".
func TestInventory(t *testing.T) {
	ours, users, md := statustest.OurGateway, statustest.UsersGateway, statustest.OldPool
	st := status.FromResult(nil, cleanupResult(ours, users, md), rev1, at(1))
	st = status.FromResult(st, cleanupResult(users, md), rev1, at(2))
	want := []status.InventoryItem{
		{Resource: md.Resource, State: planner.InventoryRemoved, Reason: md.Reason},
		{Resource: ours.Resource, State: planner.InventoryRemoved, Reason: ours.Reason},
		{Resource: users.Resource, State: planner.InventoryLeft, Reason: users.Reason},
	}
	if len(st.Inventory) != len(want) {
		t.Fatalf("inventory %+v, want %+v", st.Inventory, want)
	}
	for i := range want {
		if st.Inventory[i] != want[i] {
			t.Errorf("item %d: %+v, want %+v", i, st.Inventory[i], want[i])
		}
	}
	// Planned without cleanup approved: the record stays.
	again := status.FromResult(st, cleanupResult(), rev2, at(3))
	if len(again.Inventory) != len(want) {
		t.Errorf("inventory after a planning without one: %+v", again.Inventory)
	}
	// statustest.CleanedUp, which the renderers and the status file show,
	// is this status.
	if !slices.Equal(statustest.CleanedUp().Inventory, st.Inventory) {
		t.Errorf("statustest.CleanedUp's inventory %+v; want %+v", statustest.CleanedUp().Inventory, st.Inventory)
	}
}
