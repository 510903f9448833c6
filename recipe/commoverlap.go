package recipe

import (
	"fmt"
	"slices"
	"strings"
)

// commOverlapFields are the model fields, of those cgtune models, that
// MB's CommOverlapConfig.setup writes from the recipe's comm_overlap
// before validate(): _get_model_comm_overlap_cfgs starts them at False,
// takes the recipe's comm_overlap value where it is set, and _apply_cfgs
// copies the result onto the model (MB src/megatron/bridge/training/
// comm_overlap.py, v0.3.0 to HEAD). A recipe without a comm_overlap
// config (runtime_config_update skips the setup) keeps the model's own.
var commOverlapFields = []string{"overlap_moe_expert_parallel_comm", "delay_wgrad_compute"}

// hasCommOverlap reports whether the recipe has a comm_overlap config:
// cgtune knows one by the fields it sets.
func (c *Recipe) hasCommOverlap() bool {
	for _, f := range commOverlapFields {
		if v, ok := c.vals["comm_overlap."+f]; ok && !v.Null {
			return true
		}
	}
	return false
}

// commOverlapKey is the key that decides model field f
// (overlap_moe_expert_parallel_comm, ...): comm_overlap.f where the
// recipe's comm_overlap wins, else model.f. Messages name it, so that the
// user changes the key that counts.
func (c *Recipe) commOverlapKey(f string) string {
	if c.hasCommOverlap() {
		return "comm_overlap." + f
	}
	return "model." + f
}

// overriddenByCommOverlap refuses an override of model key key that the
// recipe's comm_overlap overwrites when MB starts; value is the override's
// value as written.
func (c *Recipe) overriddenByCommOverlap(key, value string) error {
	f, ok := strings.CutPrefix(key, "model.")
	if !ok || !slices.Contains(commOverlapFields, f) || !c.hasCommOverlap() {
		return nil
	}
	winner := "comm_overlap." + f
	now := "unset, which MB copies as false"
	if v := c.vals[winner]; !v.Null {
		now = strings.ToLower(pyBool(v.Bool))
	}
	return fmt.Errorf("the recipe's %s (%s) wins: Megatron-Bridge copies it onto %s when it starts "+
		"(MB src/megatron/bridge/training/comm_overlap.py CommOverlapConfig.setup); set %s=%s instead",
		winner, now, key, winner, value)
}

// applyCommOverlap is CommOverlapConfig.setup writing the comm_overlap
// values onto the model.
func (s *state) applyCommOverlap() {
	if !s.c.hasCommOverlap() {
		return
	}
	for _, f := range commOverlapFields {
		v := s.v("comm_overlap." + f)
		s.set("model."+f, Value{Bool: !v.Null && v.Bool})
	}
}
