"""The layout rules the code keeps (docs/method.md is the maths; this is the shape): no function in
the library over 80 lines, the training loop in one short module, and the import graph of the
retrieval pipeline pointing downward (io/errors <- evaluation, runtime <- retrieval <- train, cli)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "dpr_xrisk"


def _functions():
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path.relative_to(PKG.parent), node.name, node.end_lineno - node.lineno + 1


def test_no_library_function_is_over_80_lines():
    long = [f"{p}:{name} ({n} lines)" for p, name, n in _functions() if n > 80]
    assert not long, "split these into named steps: " + ", ".join(long)


def test_the_training_loop_reads_in_one_module_of_at_most_400_lines():
    n = len((PKG / "train" / "trainer.py").read_text(encoding="utf-8").splitlines())
    assert n <= 400, f"dpr_xrisk/train/trainer.py has {n} lines"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpr_xrisk.") and node.level == 0:
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("dpr_xrisk.")}
    return out


# each layer may import only the layers listed (and itself)
ALLOWED = {
    "io": {"errors", "io", "_pyserini"},
    "evaluation": {"errors", "io", "evaluation"},
    "runtime": {"errors", "io", "runtime"},
}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_never_import_upper_ones(layer):
    bad = {str(p.relative_to(PKG.parent)): sorted(_imports(p) - ALLOWED[layer])
           for p in (PKG / layer).rglob("*.py") if _imports(p) - ALLOWED[layer]}
    assert not bad, f"imports pointing upward from dpr_xrisk/{layer}: {bad}"


def test_retrieval_never_imports_training_serving_or_the_cli():
    bad = {str(p.relative_to(PKG.parent)): sorted(_imports(p) & {"train", "serve", "report"})
           for p in (PKG / "retrieval").rglob("*.py") if _imports(p) & {"train", "serve", "report"}}
    assert not bad, f"retrieval imports upward: {bad}"


@pytest.mark.parametrize("layer", ["retrieval", "train", "serve", "report", "evaluation", "runtime", "io"])
def test_the_library_never_imports_the_cli(layer):
    bad = [str(p.relative_to(PKG.parent)) for p in (PKG / layer).rglob("*.py") if "cli" in _imports(p)]
    assert not bad, f"the CLI sits on top of the library; these import it: {bad}"
