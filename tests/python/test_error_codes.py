"""The Python package's copies of squall's numbers (error codes, SQ_PLACE_*,
SQ_ADOPT_MAX) are the ones of common/squall_codes.h and common/proto.h:
every module-level assignment to a name SQ_... (or _SQ_...) in
bindings/python/squall is read from the source (the library is not loaded)
and checked against the headers."""
import ast
import os
import re

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
_HEADER = os.path.join(_ROOT, "common", "squall_codes.h")
_PROTO = os.path.join(_ROOT, "common", "proto.h")
_PACKAGE = os.path.join(_ROOT, "bindings", "python", "squall")


def header_values():
    text = open(_HEADER).read()
    values = {name: int(v) for name, v in re.findall(r"^\s*(SQ_\w+)\s*=\s*(\d+)\s*,", text, re.M)}
    for name, v in re.findall(r"^#define\s+(SQ_\w+)\s+(\d+)u?\s*$", text, re.M):
        values[name] = int(v)
    #   the protocol's limits the package keeps to (the header's own
    #   names win: squall_codes.h is the public one)
    for name, v in re.findall(r"^#define\s+(SQ_\w+_MAX)\s+(\d+)u?\s*(?://.*)?$",
                              open(_PROTO).read(), re.M):
        values.setdefault(name, int(v))
    return values


def package_values():
    """[(file:line, name without leading underscores, value)] of every
    module-level `SQ_X = n` or `_SQ_X, _SQ_Y = n, m`."""
    found = []
    for dirpath, _, files in os.walk(_PACKAGE):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            tree = ast.parse(open(path).read(), path)
            for node in tree.body:
                if not isinstance(node, ast.Assign):
                    continue
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                    for name, value in zip(names, values):
                        if isinstance(name, ast.Name) and name.id.lstrip("_").startswith("SQ_"):
                            where = "%s:%d" % (os.path.relpath(path, _ROOT), node.lineno)
                            number = value.value if isinstance(value, ast.Constant) else None
                            found.append((where, name.id.lstrip("_"), number))
    return found


def test_header_parsed():
    values = header_values()
    assert values["SQ_OK"] == 0 and values["SQ_E_TIMEOUT"] == 16
    assert values["SQ_PLACE_MAX"] == 1024 and "SQ_E_COUNT_" not in values
    assert values["SQ_ADOPT_MAX"] == 1024


def test_python_codes_are_the_headers():
    values = header_values()
    found = package_values()
    names = {name for _, name, _ in found}
    # The copies the bindings rely on are all seen (else the scan is blind).
    assert {"SQ_E_TIMEOUT", "SQ_E_CONNECTION", "SQ_E_DENIED", "SQ_PLACE_MAX",
            "SQ_ADOPT_MAX"} <= names, names
    wrong = ["%s: %s = %r, common/squall_codes.h or proto.h says %s"
             % (where, name, number, values.get(name, "nothing (no such name)"))
             for where, name, number in found if values.get(name) != number]
    assert not wrong, "\n".join(wrong)
