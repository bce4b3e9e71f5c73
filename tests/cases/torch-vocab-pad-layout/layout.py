"""The parallel layout a job declares, and the table sizes it implies.

The same settings are shared by the single-process and the tensor-parallel launchers, so
that checkpoints move between them: a vocabulary split over ``tensor_parallel`` ranks is
padded to a multiple of ``DIVISIBLE_BY * tensor_parallel`` rows, every shard equal.
"""

DIVISIBLE_BY = 64


def padded_vocab_size(vocab: int, tensor_parallel: int) -> int:
    multiple = DIVISIBLE_BY * tensor_parallel
    return -(-vocab // multiple) * multiple
