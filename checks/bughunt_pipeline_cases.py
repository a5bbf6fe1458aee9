"""What the docstring of the bug hunt `bughunt_pipeline` (bughunt/pipeline.py) promises of
`run(seed=0)`: the contract its visible checks hold it to (shipped with them)."""

from __future__ import annotations

from bughunt_visible import Contract


CONTRACT = Contract(keys=("model", "history"), history=("train_loss", "val_loss", "val_accuracy"),
                    epochs=12, input_shape=(5, 6), output_shapes=((5, 3),),
                    data="load_readings")
