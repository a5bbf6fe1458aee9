"""What the docstring of the bug hunt `bughunt_classifier` (bughunt/classifier.py) promises of
`run(seed=0)`: the contract its visible checks hold it to (shipped with them)."""

from __future__ import annotations

from bughunt_visible import Contract


CONTRACT = Contract(keys=("model", "history"),
                    history=("train_loss", "val_loss", "val_accuracy", "lr"), epochs=8,
                    input_shape=(5, 1, 8, 8), output_shapes=((5, 4),),
                    data="make_images")
