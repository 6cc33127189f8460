"""The code's layers have no cycle, so each part can be read (and changed)
on top of the parts below it:
- the Python package: no module imports, at its top or inside a function,
  a module that imports it back (a cycle closed by an import inside a
  function is still a cycle; `if TYPE_CHECKING:` imports, for annotations
  only, are never run);
- governor/: no file's includes reach back to it (module X uses Y when
  X.c or X.h includes Y.h);
- broker/: the placement files (the scheduler's interface, and the streams,
  actors and PLACE that ask it) are in no include cycle with each other,
  and the scheduler is in none at all: it sits below what places;
- a source file (C or Python, tests and benches included) of more than
  800 lines says why at its top ("over 800 lines" in its first comment or docstring):
  split where a seam exists, else the reason is read before the file."""
import ast
import os
import re

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_PACKAGE = os.path.join(_ROOT, "bindings", "python", "squall")


def _cycles(edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _explain(cycles, edges):
    return "; ".join("%s (%s)" % (" <-> ".join(c), ", ".join(
        "%s uses %s" % (a, b) for a in c for b in sorted(edges.get(a, ())) if b in c))
        for c in cycles)


def _run_nodes(node):
    """The nodes of a module but those under `if TYPE_CHECKING:`."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and isinstance(child.test, ast.Name) \
                and child.test.id == "TYPE_CHECKING":
            continue
        yield from _run_nodes(child)


def package_imports():
    """{module: modules of the package it imports}, every import run
    counted."""
    modules = {f[:-3] for f in os.listdir(_PACKAGE) if f.endswith(".py")}
    edges = {}
    for name in modules:
        tree = ast.parse(open(os.path.join(_PACKAGE, name + ".py")).read())
        for node in _run_nodes(tree):
            if not isinstance(node, ast.ImportFrom) or node.level != 1:
                continue
            if node.module:
                targets = [node.module.split(".")[0]]
            else:                       # from . import a, b
                targets = [a.name for a in node.names]
            edges.setdefault(name, set()).update(t for t in targets if t in modules)
    return edges


def governor_includes():
    """{module: governor modules whose header it includes}."""
    d = os.path.join(_ROOT, "governor")
    headers = {f[:-2] for f in os.listdir(d) if f.endswith(".h")}
    edges = {}
    for f in os.listdir(d):
        if not f.endswith((".c", ".h")):
            continue
        for m in re.finditer(r'^\s*#\s*include\s+"(\w+)\.h"', open(os.path.join(d, f)).read(), re.M):
            if m.group(1) in headers and m.group(1) != f[:-2]:
                edges.setdefault(f[:-2], set()).add(m.group(1))
    return edges


def broker_includes():
    """{module: broker modules whose header it includes}, over broker/'s
    folders (a module is a file name without .c / .h)."""
    sources = {}
    for top, _, files in os.walk(os.path.join(_ROOT, "broker")):
        for f in files:
            if f.endswith((".c", ".h")):
                sources.setdefault(f[:-2], []).append(os.path.join(top, f))
    headers = {m for m, paths in sources.items() if any(p.endswith(".h") for p in paths)}
    edges = {}
    for module, paths in sources.items():
        for path in paths:
            for m in re.finditer(r'^\s*#\s*include\s+"(\w+)\.h"', open(path).read(), re.M):
                if m.group(1) in headers and m.group(1) != module:
                    edges.setdefault(module, set()).add(m.group(1))
    return edges


#   Where governors are picked: the scheduler, and the streams' readers,
#   actors and PLACE's copies, which ask it (docs/architecture.md).
_PLACEMENT = {"scheduler", "streams", "graph_actor", "place"}


def test_cycles_are_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_python_package_has_no_import_cycle():
    edges = package_imports()
    assert edges.get("_client"), "the package's imports were not found"
    cycles = _cycles(edges)
    assert not cycles, "import cycles in squall/: " + _explain(cycles, edges)


def test_governor_has_no_include_cycle():
    edges = governor_includes()
    assert edges.get("compute"), "the governor's includes were not found"
    cycles = _cycles(edges)
    assert not cycles, "include cycles in governor/: " + _explain(cycles, edges)


def test_broker_placement_files_have_no_include_cycle():
    edges = broker_includes()
    assert _PLACEMENT <= set(edges), "the broker's placement files were not found: %s" % (
        sorted(_PLACEMENT - set(edges)))
    assert "scheduler" in edges["place"] or any(
        "scheduler" in edges.get(h, ()) for h in edges["place"]), "place's includes were not read"
    cycles = _cycles(edges)
    joined = [c for c in cycles if len(_PLACEMENT.intersection(c)) > 1 or "scheduler" in c]
    assert not joined, "include cycles through the broker's placement: " + _explain(joined, edges)


_LONG = 800
_SKIP_DIRS = {".git", "node_modules"}


def long_files_without_reason():
    out = []
    for top, dirs, files in os.walk(_ROOT):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(("build", "."))]
        for f in files:
            if not f.endswith((".c", ".h", ".py")):
                continue
            path = os.path.join(top, f)
            text = open(path, errors="replace").read()
            if text.count("\n") <= _LONG:
                continue
            m = re.match(r'\s*(/\*.*?\*/|(?:#[^\n]*\n)*\s*(?:"""|\'\'\')(?s:.*?)(?:"""|\'\'\'))',
                         text, re.S)
            if not m or not re.search(r"over\s+800\s+lines", m.group(1), re.I):
                out.append(os.path.relpath(path, _ROOT))
    return sorted(out)


def test_long_files_say_why():
    missing = long_files_without_reason()
    assert not missing, ("over %d lines with no reason in the first comment or docstring "
                         "(\"Over %d lines: why\"), or split them: %s"
                         % (_LONG, _LONG, ", ".join(missing)))
