"""When a mypyc build of the per-request path may be used (lblab/compiled.py)."""

from __future__ import annotations

import ast
import shutil
import tomllib
from pathlib import Path

from lblab import compiled


def _package_copy(tmp_path: Path) -> Path:
    """The sources of ``MODULES`` in a package folder of their own."""
    package = tmp_path / "lblab"
    for module in compiled.MODULES:
        target = compiled.source_of(module, package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(compiled.source_of(module), target)
    return package


def test_a_build_of_the_current_source_for_this_interpreter_may_be_used(tmp_path):
    package = _package_copy(tmp_path)
    assert compiled.stale_reason(compiled.manifest_for(compiled.MODULES, package), package) is None


def test_one_changed_source_makes_the_whole_build_stale_and_names_the_file(tmp_path):
    package = _package_copy(tmp_path)
    manifest = compiled.manifest_for(compiled.MODULES, package)
    router = compiled.source_of("lblab.balancer.router", package)
    router.write_text(router.read_text() + "\n# edited\n")
    assert compiled.stale_reason(manifest, package) == "router.py changed since the build"


def test_a_build_for_another_interpreter_or_module_list_is_not_used(tmp_path):
    package = _package_copy(tmp_path)
    manifest = compiled.manifest_for(compiled.MODULES, package)
    other = {**manifest, "interpreter": "cpython-312 .cpython-312-x86_64-linux-gnu.so"}
    assert "built for 'cpython-312" in (compiled.stale_reason(other, package) or "")
    fewer = compiled.manifest_for(compiled.MODULES[:-1], package)
    assert compiled.stale_reason(fewer, package) == "built from another list of modules"


def test_a_missing_source_is_a_reason_not_a_crash(tmp_path):
    package = _package_copy(tmp_path)
    manifest = compiled.manifest_for(compiled.MODULES, package)
    compiled.source_of("lblab.wire.codec", package).unlink()
    assert (compiled.stale_reason(manifest, package) or "").startswith(
        "cannot read lblab.wire.codec's source"
    )


def test_mypy_warns_of_unreachable_code_the_compiled_only_failure_class():
    settings = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert settings["tool"]["mypy"]["warn_unreachable"] is True


def test_every_registered_strategy_is_compiled_with_the_others():
    """A strategy left out of ``MODULES`` would run interpreted beside compiled ones and
    pick slower than the strategies it is compared with: registering one means compiling
    it, with every class it inherits from."""
    from lblab.balancer.strategies.registry import STRATEGIES

    missing = {
        f"{name}: {base.__module__}"
        for name, cls in STRATEGIES.items()
        for base in cls.__mro__
        if base.__module__.startswith("lblab.") and base.__module__ not in compiled.MODULES
    }
    assert not missing, f"add to lblab/compiled.py's MODULES: {sorted(missing)}"


def test_compiled_modules_keep_their_constants_final_and_strategies_open():
    """STYLE's rules for the compiled path, checked: a module constant that is not
    ``Final`` is a dict lookup on every use, and a strategy class not open to interpreted
    subclasses runs its ``__init__`` twice when Python constructs it."""
    from lblab.balancer.strategies.registry import STRATEGIES

    strategy_classes = {base.__name__ for cls in STRATEGIES.values() for base in cls.__mro__}
    strategy_classes -= {"object"}
    problems = []
    for module in compiled.MODULES:
        source = compiled.source_of(module)
        for node in ast.parse(source.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.isupper()
                and not (
                    isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "TypeVar"
                )
            ):
                problems.append(f"{source.name}:{node.lineno} {node.targets[0].id} is not Final")
            if isinstance(node, ast.ClassDef) and node.name in strategy_classes:
                decorators = {ast.unparse(d) for d in node.decorator_list}
                if "mypyc_attr(allow_interpreted_subclasses=True)" not in decorators:
                    problems.append(f"{source.name}:{node.lineno} {node.name} is not open")
    assert not problems, problems


def test_each_strategy_reads_its_config_as_the_class_it_builds():
    """``Config`` (what the registry builds from the options) and the generic parameter
    (what compiled code reads ``self.config`` as) are written apart; mypy cannot tie them.
    A strategy naming one class in each would fail only at run time, compiled."""
    from lblab.balancer.strategies.registry import STRATEGIES

    classes = {cls.__name__: cls for top in STRATEGIES.values() for cls in top.__mro__}
    mismatched = []
    for module in {cls.__module__ for cls in classes.values()} & set(compiled.MODULES):
        for node in ast.parse(compiled.source_of(module).read_text()).body:
            if not isinstance(node, ast.ClassDef) or node.name not in classes:
                continue
            params = [b.slice for b in node.bases if isinstance(b, ast.Subscript)]
            param = ast.unparse(params[0]) if params else None
            if param is None or param == "C":  # inherits its parent's, or stays generic
                continue
            config = classes[node.name].Config.__name__
            if param != config:
                mismatched.append(f"{node.name}: generic over {param}, Config is {config}")
    assert not mismatched, mismatched
