package status

import (
	"bytes"
	"testing"

	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
)

// cleanupResult is a replace plan's cleanup with the planner's inventory.
func cleanupResult(inv ...planner.InventoryItem) *planner.Result {
	gw := mkStep("cleanup", step.Kube, step.Delete, step.OpenStackServer, "tenants", "vpn-gateway-09703f29")
	res := result("cleanup", "cleanup", "", phase("cleanup", planner.Approved, "", 1, []step.Step{gw}))
	res.Inventory = inv
	return res
}

// TestInventory: the cleanup's inventory is recorded, kept across
// plannings, and an item the planner no longer lists that was to be
// removed is recorded as removed; a user's resource stays "left".
func TestInventory(t *testing.T) {
	ours := planner.InventoryItem{Resource: "OpenStackServer tenants/vpn-gateway-09703f29", State: planner.InventoryToRemove, Reason: "the gateway ferry created"}
	users := planner.InventoryItem{Resource: "OpenStackServer tenants/vpn-gateway-99985c5d", State: planner.InventoryLeft, Reason: "ferry did not create it"}
	md := planner.InventoryItem{Resource: "MachineDeployment tenants/vsphere-gateway-md-0", State: planner.InventoryRemoved, Reason: "named in spec.replace.oldMachineDeployments"}
	st := FromResult(nil, cleanupResult(ours, users, md), rev1, at(1))
	st = FromResult(st, cleanupResult(users, md), rev1, at(2))
	want := []InventoryItem{
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
	again := FromResult(st, cleanupResult(), rev2, at(3))
	if len(again.Inventory) != len(want) {
		t.Errorf("inventory after a planning without one: %+v", again.Inventory)
	}
	var b bytes.Buffer
	if err := Table(&b, st); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "inventory.txt", b.Bytes())
	checkGolden(t, "inventory.md", []byte(Markdown(st, 0, "")))
	enc, err := Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(enc)
	if err != nil || len(back.Inventory) != len(want) || back.Inventory[1] != want[1] {
		t.Errorf("inventory read back: %+v, %v", back, err)
	}
}
