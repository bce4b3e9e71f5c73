"""Reserved token ids."""

PAD = 0
