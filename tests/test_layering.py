"""The package's import structure: no module imports, directly or through others, a module that
imports it back (not even from inside a function), and an import only ever points down the
layers of the design: kernels < autograd < nn < attribution, viz < explore (< models < cli)."""
import ast
import pathlib

import saliency

ROOT = pathlib.Path(saliency.__file__).parent
LEVEL = {"saliency._write": 0, "saliency.kernels": 0, "saliency.autograd": 1, "saliency.nn": 2, "saliency.optim": 2,
         "saliency.attribution": 3, "saliency.viz": 3, "saliency.explore": 4}


def _modules():
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = ["saliency"] + list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(mods):
    """{module: set of the package's modules it imports anywhere in its code}."""
    edges = {}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module
                for alias in node.names:
                    if f"{target}.{alias.name}" in mods:
                        found.add(f"{target}.{alias.name}")
                    elif target in mods:
                        found.add(target)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in mods)
        edges[mod] = found
    return edges


def _layer(mod):
    for name in LEVEL:
        if mod == name or mod.startswith(name + "."):
            return name
    return None


def test_the_scan_sees_the_engine_modules():
    edges = _imports(_modules())
    assert "saliency.autograd.tensor" in edges["saliency.autograd.node"]
    assert "saliency.autograd.node" in edges["saliency.autograd.ops.elementwise"]


def test_no_import_cycles():
    edges = _imports(_modules())
    state, path, cycles = {}, [], []

    def visit(mod):  # the package is a few hundred modules: recursion depth is no concern
        state[mod] = "open"
        path.append(mod)
        for dep in sorted(edges[mod]):
            if state.get(dep) == "open":
                cycles.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        path.pop()
        state[mod] = "done"

    for mod in sorted(edges):
        if mod not in state:
            visit(mod)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_imports_point_down_the_layers():
    edges = _imports(_modules())
    upward = []
    for mod, deps in edges.items():
        layer = _layer(mod)
        if layer is None:
            continue  # the package root and the folders beside it (models, cli) sit on top
        for dep in deps:
            other = _layer(dep)
            if other is not None and LEVEL[other] > LEVEL[layer]:
                upward.append(f"{mod} imports {dep}")
    assert not upward, "\n".join(sorted(upward))
