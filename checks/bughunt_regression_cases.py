"""What the docstring of the bug hunt `bughunt_regression` (bughunt/regression.py) promises of
`run(seed=0)`: the contract its visible checks hold it to (shipped with them)."""

from __future__ import annotations

from bughunt_visible import Contract


CONTRACT = Contract(keys=("model", "history", "scaler"), history=("train_loss", "val_loss"),
                    epochs=30, input_shape=(5, 4), output_shapes=((5, 1),),
                    data="make_data")
