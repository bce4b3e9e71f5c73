"""The fix the ground truth applies: link a group's optimizer-state fragments once that
group's state exists, and call the linkage complete only when every group is linked."""

from deepspeed.utils.mixed_precision_linkage import lazy_init_hp_params_optimizer_state


def _lazy_init_hp_params_optimizer_state(self):
    if self._hp_optimizer_states_linked:
        return
    linked = True
    for i, flat in enumerate(self.single_partition_of_fp32_groups):
        if len(self.optimizer.state.get(flat, {})) == 0:
            linked = False  # this group has not stepped yet: its state does not exist
            continue
        lazy_init_hp_params_optimizer_state(self.bit16_groups[i], flat, self.optimizer.state)
    self._hp_optimizer_states_linked = linked
