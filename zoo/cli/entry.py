"""The ``zoo`` command's entry point, :func:`main`: parse, run, and report an error as one line and a hint."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Sequence

from zoo.cli.errors import UsageError
from zoo.cli.parser import build_parser, model_first_argv, weights_name_argv

_HINTS = {
    "FileNotFoundError": "check the path",
    "PermissionError": "check the file's permissions",
    "KeyError": "`zoo list` and `zoo weights list` show the names",
    "TypeError": "`zoo info NAME` shows the config keys and their types",
    "ExportError": "nothing was written; `zoo export --help` lists the formats",
}


def _report(command_name: str, err: BaseException) -> None:
    msg = err.args[0] if isinstance(err, KeyError) and err.args else err
    known = isinstance(err, (UsageError, ValueError, TypeError, KeyError, OSError))
    kind = "" if known else f"{type(err).__name__}: "
    print(f"zoo {command_name}: error: {kind}{msg}", file=sys.stderr)
    hint = _HINTS.get(type(err).__name__)
    print(f"  ({hint + '; ' if hint else ''}run with --debug for the traceback)", file=sys.stderr)


class _StdoutHandler(logging.StreamHandler):
    """Log records to whatever ``sys.stdout`` is when they are emitted (so a captured stdout gets them), or
    ``sys.stderr`` under ``--json``, whose standard output is JSON only."""

    to_stderr = False

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr if self.to_stderr else sys.stdout

    @stream.setter
    def stream(self, value) -> None:
        pass


def _show_zoo_logs(to_stderr: bool = False) -> None:
    """The families say what they decided (a split chosen, a setting applied on resume) through their
    module loggers; the command shows those INFO messages as plain lines (on standard error under --json)."""
    _StdoutHandler.to_stderr = to_stderr
    logger = logging.getLogger("zoo")
    if not any(isinstance(h, _StdoutHandler) for h in logger.handlers):
        handler = _StdoutHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


@contextlib.contextmanager
def _plain_warnings(command: str):
    """Warnings as one line each, ``zoo CMD: warning: message``, above any progress bar: the file and line
    a warning names mean nothing at a prompt, and the source line Python adds is zoo's own entry script."""
    from zoo._progress import ProgressBar

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        ProgressBar.write(f"zoo {command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def debug_env() -> bool:
    """``$ZOO_DEBUG`` on, as ``ZOO_OFFLINE`` reads its values (:func:`zoo.inputs.env_on`): ``ZOO_DEBUG=0``
    turned debugging on."""
    from zoo.inputs import env_on

    return env_on("ZOO_DEBUG")


def main(argv: Sequence[str] | None = None) -> int:
    # no argv: this process's own command line (the `zoo` script, `python -m zoo`), which decides how
    # warnings look; a caller passing argv (a test, a script) keeps its own warning machinery
    own_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    _show_zoo_logs(to_stderr="--json" in argv)
    debug = "--debug" in argv or debug_env()
    rest = [a for a in argv if a != "--debug"]
    plain = _plain_warnings(rest[0] if rest else "") if own_process and not debug else contextlib.nullcontext()
    if own_process:
        from zoo._interrupts import sigterm_as_ctrl_c

        sigterm_as_ctrl_c()
    with plain:
        return _dispatch(rest, debug)


def _dispatch(rest: list[str], debug: bool) -> int:
    try:
        rest = model_first_argv(weights_name_argv(rest))
        parser = build_parser(rest)
        args = parser.parse_args(rest)
        code = args._run(args)
    except KeyboardInterrupt as err:  # a run that saved its state on the way says where (TD3's loop does)
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `zoo list | head`
        sys.stderr.close()
        return 0
    except Exception as err:
        if debug:
            raise
        _report(rest[0] if rest else "", err)
        return 2
    return int(code or 0)
