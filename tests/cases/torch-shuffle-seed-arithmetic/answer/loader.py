"""The fix the ground truth applies: ShardLoader's per-epoch seed as sharddata 0.2 formed it,
seed + epoch * world_size + rank. 0.3 writes the sum as a bitwise or, the same number only
where epoch * world_size has no bit in common with the rank (a power-of-two world size)."""


def epoch_seed_v1(self) -> int:
    return self.seed + self.epoch * self.world_size + self.rank
