"""The house rules, checked on the source: the spine imports no family, no family imports another, no
function is over 80 lines, and the package says it is typed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import zoo

PACKAGE = Path(zoo.__file__).resolve().parent
FAMILIES = ("vision", "seq2seq", "rl", "hyperspectral", "video")
MAX_FUNCTION_LINES = 80


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out.append((".".join(p for p in parts if p != "__init__"), path))
    return out


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every absolute module name ``path`` imports, at module level or inside functions (lazy imports too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _family(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "zoo" and parts[1] in FAMILIES else None


def test_no_family_imports_another_family():
    crossings = [f"{module} (line {line}) imports {name}"
                 for module, path in _modules() if _family(module)
                 for line, name in _imports(path) if _family(name) not in (None, _family(module))]
    assert not crossings, "families reach each other through zoo.build, not imports:\n" + "\n".join(crossings)


def test_the_spine_imports_no_family():
    # the spine is every module outside a family package: the registry, hub, engine, api, the CLI, exporting, ...
    spine = [(m, p) for m, p in _modules() if _family(m) is None]
    assert {"zoo.cli", "zoo.registry", "zoo.hub", "zoo.engine.fit"} <= {m for m, _ in spine}  # the walk found them
    leaks = [f"{module} (line {line}) imports {name}" for module, path in spine
             for line, name in _imports(path) if _family(name)]
    assert not leaks, "the spine must not import a family (families register lazily):\n" + "\n".join(leaks)


# What a family's package ``__init__`` is allowed to be: its declarations (names, CLI hooks), no model code.
_DECLARATIONS = {f"zoo.{f}" for f in FAMILIES} | {f"zoo.{f}.cli" for f in FAMILIES}


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(sorted(m for m in sys.modules if m == 'torch' or m.split('.')[:2][-1] in {FAMILIES!r}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=PACKAGE.parent)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_listing_models_and_weights_loads_no_model_code():
    loaded = _loaded_after("import zoo\nzoo.list_models(); zoo.list_weights()")
    assert "torch" not in loaded  # `zoo list` stays instant
    assert set(loaded) <= _DECLARATIONS, sorted(set(loaded) - _DECLARATIONS)


def test_subpackages_are_attributes_of_a_bare_import_zoo():
    # `import zoo; zoo.hub.get_entry(...)` works without `import zoo.hub`, and only loads what it names
    code = ("import sys\nimport zoo\nassert 'zoo.hub' not in sys.modules\n"
            "assert zoo.hub.get_entry('resnet18.cifar10').name == 'resnet18.cifar10'\n"
            "assert callable(zoo.engine.fit) and 'hub' in dir(zoo)")
    assert "torch" in _loaded_after(code)  # the engine is torch code
    assert "torch" not in _loaded_after(code.split("\nassert callable")[0])  # the hub alone is not
    with pytest.raises(subprocess.CalledProcessError):
        _loaded_after("import zoo\nzoo.no_such_subpackage")


def test_building_one_family_loads_no_other_familys_code():
    loaded = _loaded_after("import zoo\nzoo.build('hsi-pca-svm')")
    foreign = {m for m in loaded if _family(m) not in (None, "hyperspectral")} - _DECLARATIONS
    assert not foreign, sorted(foreign)
    assert any(m.startswith("zoo.hyperspectral.") and m not in _DECLARATIONS for m in loaded)


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_no_function_is_over_80_lines(module, path):
    long = [f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{module}: split into named steps: " + ", ".join(long)


def test_the_package_is_typed():
    assert (PACKAGE / "py.typed").is_file()
    pyproject = (PACKAGE.parent / "pyproject.toml")
    if pyproject.is_file():  # a source checkout: the marker ships as package data
        assert '"py.typed"' in pyproject.read_text(encoding="utf-8")
