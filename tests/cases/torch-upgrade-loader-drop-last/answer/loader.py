"""The fix the ground truth applies: BatchLoader's constructor with tabdata 0.4's defaults,
drop_last True again (0.5 turned it to False), so a job that never states it keeps
dropping the epoch's shorter last batch, as it was trained with."""


def init_v1(self, features, targets, batch_size, shuffle=True, seed=0, drop_last=True):
    self.features = features
    self.targets = targets
    self.batch_size = batch_size
    self.shuffle = shuffle
    self.seed = seed
    self.drop_last = drop_last
    self.epoch = 0
