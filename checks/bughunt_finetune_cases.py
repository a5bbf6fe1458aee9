"""What the docstring of the bug hunt `bughunt_finetune` (bughunt/finetune.py) promises of
`run(seed=0)`: the contract its visible checks hold it to (shipped with them)."""

from __future__ import annotations

from bughunt_visible import Contract


CONTRACT = Contract(keys=("model", "history"), history=("train_loss", "val_loss", "val_accuracy"),
                    epochs=10, input_shape=(5, 12), output_shapes=((5, 3), (5,)),
                    data="make_task")
