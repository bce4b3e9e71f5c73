"""Cross-framework correspondence: the state of two runs of different frameworks (Megatron
against DeepSpeed) captured at the same boundaries, paired by identity, and compared.

- ``capture``: hooks that dump each framework's state at the boundaries, resolved through
  its own storage (Megatron's grad buffers and main params, DeepSpeed's flat partitions and
  fragment maps) to one tensor per model parameter.
- ``model``: the records that cross a file (side metadata, the mapping, the table).
- ``mapping``: pairs parameters by init bytes, shape and normalised name.
- ``boundaries``: compares the paired tensors per step and boundary and names the policy
  the evidence points at.
- ``table``: the compatibility table as rich, JSON and Markdown.
"""
