"""The ``zoo`` command.

Subcommands are registered with :func:`command` (the spine's in this package, and each family's in
``zoo/<family>/cli.py``); ``zoo demo`` runs every step registered with :func:`demo`.

``zoo train|eval|predict NAME`` are one command for every family: they build ``NAME`` (its config
options are generated from the model's config dataclass: ``zoo train td3 --help`` lists them), hand
``--data``/``--env`` to ``zoo.train`` / ``zoo.evaluate`` / ``zoo.predict`` as they are, and say what
they inferred from the data (an env's spaces, a folder's classes). A family adds options of its own
with :func:`family_options` (``--splits`` for videos, ``--labels`` for scenes), and says how ``zoo predict``
reads its inputs and shows its result with :func:`predict_rules` (a scene's label map written by ``--out``).

Errors print one line and a hint, exit code 2; ``--debug`` (or ``ZOO_DEBUG=1``) shows the traceback.
``zoo predict`` exits 1 when some inputs could not be read (their rows say why; the others are printed),
``zoo train --out`` when the model could not be saved there (it is saved to a fallback file it names).
Importing this package and the families' CLI modules imports no torch, so ``zoo --help`` and
``zoo list`` answer at once.

One module per concept: ``commands`` (the registry of subcommands and family options), ``arguments`` (the
helpers every command shares), ``parser`` and ``entry`` (:func:`main`), ``model_options`` (what ``zoo
train|eval|predict`` share), and one module per spine command: ``catalog`` (list, info), ``train`` (with
``train_output``), ``evaluate``, ``predict``, ``bench``, ``demos``, ``hub`` (pull, weights, cache) and
``export``. Importing the package registers them all.
"""

from __future__ import annotations

from zoo.cli import bench, catalog, demos, evaluate, export, hub, predict, train  # noqa: F401  (register their commands)
from zoo.cli.arguments import (
    AMP_CHOICES,
    add_device_and_amp,
    amp_option,
    json_line,
    json_plain,
    model_kv,
    parse_kv,
    stdin_lines,
    with_stdin,
)
from zoo.cli.commands import command, family_options
from zoo.cli.demos import demo
from zoo.cli.entry import main
from zoo.cli.errors import UsageError
from zoo.cli.model_options import config_flag, merge_sets
from zoo.cli.parser import build_parser, weights_name_argv
from zoo.cli.predict import PredictRules, predict_rules

__all__ = ["AMP_CHOICES", "PredictRules", "UsageError", "add_device_and_amp", "amp_option",
           "build_parser", "command", "config_flag", "demo", "family_options", "json_line", "json_plain", "main",
           "merge_sets", "model_kv", "parse_kv", "predict_rules", "stdin_lines", "weights_name_argv", "with_stdin"]
