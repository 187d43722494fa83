"""The package's layers (docs/architecture.md, "The Python package"): every
import of one fabriclab module by another, read from the source (imports
inside functions too), runs down the parts' order or stays within a part,
and no modules import each other in a circle. The Rust crates have their
own check (crates/fabriclab-core/tests/layers.rs)."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "python" / "fabriclab"

# The parts from the bottom up; a module may import its own part or any part below it.
ORDER = [
    {"errors", "_version", "util"},
    {"scenario"},
    {"collectives"},
    {"sim"},
    {"runtime"},
    {"observe", "torch", "api"},
    {"sweep"},
    {"systems"},
    {"cli"},
]
RANK = {part: i for i, parts in enumerate(ORDER) for part in parts}
# The one arrow up: fabriclab.simulate hands a scenario with [recovery] to C4's recovery runner.
ALLOWED_UP = {("api", "systems.c4.recovery")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The fabriclab modules ``name`` imports (a package's face counts as the package)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("fabriclab."):
                target = node.module.removeprefix("fabriclab.")
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                out.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            out |= {a.name.removeprefix("fabriclab.") for a in node.names if a.name.startswith("fabriclab.")}
    return {m for m in out if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def part(module: str) -> str:
    return module.split(".")[0]


def test_every_module_belongs_to_a_part():
    # A new top-level module or package must be placed in ORDER (and in docs/architecture.md).
    loose = sorted({part(m) for m in modules() if m and part(m) not in RANK and part(m) != "data"})
    assert loose == []


def test_imports_run_down_the_parts():
    up = []
    for a, targets in graph().items():
        if not a:  # the package's face hands names on, loaded on first use
            continue
        for b in targets:
            if not b or part(a) == part(b) or (a, b) in ALLOWED_UP:
                continue
            if RANK[part(a)] < RANK[part(b)]:
                up.append(f"{a} -> {b}")
    assert sorted(up) == []


def test_no_import_circles():
    # Tarjan's strongly connected components over the module graph (the face excluded).
    g = {a: {b for b in bs if b} for a, bs in graph().items() if a}
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_check_sees_a_circle_and_an_arrow_up(tmp_path, monkeypatch):
    # The checks themselves: a hand-made package with a circle and an upward import fails both.
    pkg = tmp_path / "fabriclab"
    (pkg / "scenario").mkdir(parents=True)
    (pkg / "sim").mkdir()
    (pkg / "scenario" / "__init__.py").write_text("")
    (pkg / "sim" / "__init__.py").write_text("")
    (pkg / "scenario" / "a.py").write_text("from ..sim import b\n")
    (pkg / "sim" / "b.py").write_text("def f():\n    from ..scenario import a\n")
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    g = graph()
    assert g["scenario.a"] == {"sim.b"} and g["sim.b"] == {"scenario.a"}
    try:
        test_imports_run_down_the_parts()
    except AssertionError:
        pass
    else:
        raise AssertionError("the upward import scenario.a -> sim.b was not seen")
    try:
        test_no_import_circles()
    except AssertionError:
        pass
    else:
        raise AssertionError("the circle scenario.a <-> sim.b was not seen")
