"""The job's checkpoint files: one torch.save of every item the trainer lists, each by its
name, and the load that hands every item its part back."""

import torch


def write(path: str, items: dict) -> None:
    torch.save({name: item.state_dict() for name, item in items.items()}, path)


def read(path: str, items: dict) -> None:
    state = torch.load(path)
    for name, item in items.items():
        item.load_state_dict(state[name])
