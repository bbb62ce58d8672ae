"""HybridSN with held-out tiles ends with the weights of the best epoch as fit counts it (early_stopping_min_delta
too): the one it reports and copies to best.pt, so that a resumed run ends with the weights the whole run does."""

from __future__ import annotations

import warnings

import torch

import zoo
from zoo.engine import LambdaCallback
from zoo.hyperspectral.synthetic import make_scene

# val_loss by epoch: epoch 2 is lower than epoch 1 by less than min_delta (no improvement to fit), and no later epoch
# is lower than it; scripted, so that the run meets this on any machine
VAL_LOSS = [1.0, 0.97, 0.99, 0.99]
MIN_DELTA = 0.05


def _scripted(state, row):
    row["val_loss"] = VAL_LOSS[row["epoch"] - 1]  # before the monitor and RestoreBest read it


def _train(scene, folder, epochs, *callbacks, **options):
    torch.manual_seed(0)
    return zoo.train(zoo.build("hybridsn", n_bands=13, num_classes=3, window=9), scene, epochs=epochs,
                     checkpoint_dir=folder, split="random", train_fraction=0.3, val_fraction=0.3, val_block=4,
                     batch_size=64, amp=None, progress=False, early_stopping_min_delta=MIN_DELTA, keep_last=1,
                     callbacks=[LambdaCallback(on_epoch_end=_scripted), *callbacks], **options)


def test_held_out_tiles_keep_the_best_epoch_fit_reports_and_a_resume_ends_with_the_same_weights(tmp_path):
    """Before: the held-out run's RestoreBest counted any decrease, so the run returned epoch 2's weights while
    best_epoch and best.pt said epoch 1; a resume after epoch 3, whose keep_last had pruned epoch-0002.pt, could
    not read epoch 2 back (a warning) and returned epoch 4's: another model than the run it continued."""
    scene = make_scene(16, 16, 20, 3, block=4, seed=0)
    full = _train(scene, tmp_path / "full", 4)
    best = torch.load(tmp_path / "full" / "best.pt", weights_only=True)
    assert full.best_epoch == best["epoch"] == 1
    for name, tensor in full.model.state_dict().items():
        assert torch.equal(tensor, best["model"][name]), name

    def stop_after_3(state, row):
        if row["epoch"] == 3:
            state.request_stop("interrupted")

    _train(scene, tmp_path / "part", 4, LambdaCallback(on_epoch_end=stop_after_3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "RestoreBest: ... no checkpoint of that epoch is left"
        resumed = _train(scene, tmp_path / "part", 4, resume=True)
    assert resumed.best_epoch == 1
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
