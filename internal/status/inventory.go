package status

import (
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/internal/planner"
)

// InventoryItem is one resource of the old cloud, or of the move, that
// the cleanup phase removed, is to remove, or left in place, and why
// (planner.InventoryItem, kept across plannings).
type InventoryItem struct {
	// Resource reads "Kind namespace/name" or "OpenStack kind name".
	Resource string `json:"resource"`
	// State is removed, to remove, or left.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// mergeInventory merges the planner's inventory into the one recorded
// before. The planner lists only what it still observes or can name, so
// an item it no longer lists keeps its record, and one that was to be
// removed has been: removed. Without a new inventory (cleanup not
// approved) the record stays as it is. Sorted by resource.
func mergeInventory(prev []InventoryItem, now []planner.InventoryItem) []InventoryItem {
	if len(now) == 0 {
		return slices.Clone(prev)
	}
	listed := map[string]bool{}
	var out []InventoryItem
	for _, it := range now {
		listed[it.Resource] = true
		out = append(out, InventoryItem{Resource: it.Resource, State: it.State, Reason: it.Reason})
	}
	for _, it := range prev {
		if listed[it.Resource] {
			continue
		}
		if it.State == planner.InventoryToRemove {
			it.State = planner.InventoryRemoved
		}
		out = append(out, it)
	}
	slices.SortStableFunc(out, func(a, b InventoryItem) int { return strings.Compare(a.Resource, b.Resource) })
	return out
}
