"""docs/architecture.md is the map of the code, kept honest:
- every source file (C sources and headers of common/, broker/, governor/,
  client/; the Python package; scripts/) is named in its directory's
  section, as `name.c`, `name.h` or `name.c/h` (a file in a folder of it
  by its path from the directory: `graph/graph.c`);
- every file the document names exists, and every function, type or field
  it cites (a `name_with_underscores`) is in the sources; a file's own
  static (`s_name`) is cited beside a file that has it;
- every message type of common/proto.h is named in the `## common/`
  section (the row of the proto file that encodes it);
- no source file's header says how long it is ("about N lines"): such a
  figure is stale after the next change.
Each failure says what to add or change, so that a merge that brings files
is fixed in one edit."""
import os
import re

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_DOC = os.path.join(_ROOT, "docs", "architecture.md")

# Directory of sources -> file patterns of its sources.
_SOURCE_DIRS = {
    "common": (".c", ".h"),
    "broker": (".c", ".h"),
    "governor": (".c", ".h", ".py"),
    "client": (".c", ".h"),
    "bindings/python/squall": (".py",),
    "scripts": (".sh", ".py"),
}


def source_files():
    """{directory: [file names]} of every source file, sorted; a file in a
    folder of the directory is named by its path from it (broker's
    `graph/graph.c`)."""
    found = {}
    for d, endings in _SOURCE_DIRS.items():
        top = os.path.join(_ROOT, d)
        names = []
        for dirpath, _, files in os.walk(top):
            names += [os.path.relpath(os.path.join(dirpath, f), top)
                      for f in files if f.endswith(endings)]
        found[d] = sorted(names)
    return found


def sections():
    """{directory: text} of the document's sections titled `## dir/ ...`,
    and the whole text under the key None."""
    text = open(_DOC).read()
    parts = {None: text}
    heads = list(re.finditer(r"^## (\S+?)/(?:\s|$)", text, re.M))
    starts = [m.start() for m in re.finditer(r"^## ", text, re.M)] + [len(text)]
    for m in heads:
        end = next(s for s in starts if s > m.start())
        parts[m.group(1)] = text[m.start():end]
    return parts


def cited(text):
    """The backquoted tokens of a text."""
    return re.findall(r"`([^`\n]+)`", text)


def file_names(token):
    """The file names a token names: `a.c/h` is a.c and a.h; None if the
    token is not a file name."""
    m = re.fullmatch(r"((?:[\w.-]+/)*)([\w-]+)\.(c/h|c|h|py|sh)", token)
    if not m:
        return None
    if m.group(3) == "c/h":
        return [m.group(1) + m.group(2) + ".c", m.group(1) + m.group(2) + ".h"]
    return [token]


def test_every_source_file_is_named_in_its_section():
    parts = sections()
    missing = []
    for d, names in source_files().items():
        if d not in parts:
            missing.append("add a section `## %s/ — ...` with a table naming its files: %s"
                           % (d, ", ".join(names)))
            continue
        named = set()
        for token in cited(parts[d]):
            named.update(file_names(token) or [])
        for name in names:
            if name not in named:
                row = "| `%s` | its thread | what it owns |" if d == "governor" else "| `%s` | what it owns |"
                missing.append("%s/%s: add a row `%s` to the `## %s/` table"
                               % (d, name, row % name, d))
    assert not missing, "docs/architecture.md does not name every source file:\n" + "\n".join(missing)


def _all_sources():
    for d in _SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(_ROOT, d)):
            for f in files:
                if f.endswith((".c", ".h", ".def", ".py", ".sh")):
                    yield os.path.join(dirpath, f)


def test_every_file_it_names_exists():
    parts = sections()
    everywhere = {os.path.relpath(p, _ROOT) for p in _all_sources()}
    basenames = {os.path.basename(p) for p in everywhere}
    wrong = []
    for d, text in parts.items():
        for token in cited(text):
            for name in file_names(token) or []:
                if d is not None and "/" not in name:
                    # in the directory or one of its folders
                    ok = any(p == "%s/%s" % (d, name) or
                             (p.startswith(d + "/") and p.endswith("/" + name)) for p in everywhere)
                    where = "%s/%s" % (d, name)
                elif "/" in name:
                    # from the root, or a folder's path from its directory
                    ok = os.path.isfile(os.path.join(_ROOT, name)) or any(
                        p.endswith("/" + name) for p in everywhere)
                    where = name
                else:
                    ok = name in basenames
                    where = name
                if not ok:
                    wrong.append("`%s` (section %s) names %s, which does not exist: rename or remove it"
                                 % (token, d or "outside the directory tables", where))
    assert not wrong, "docs/architecture.md names files that are not there:\n" + "\n".join(sorted(set(wrong)))


def test_every_name_it_cites_exists():
    words = set()
    for path in _all_sources():
        words.update(re.findall(r"\w+", open(path, errors="replace").read()))
    wrong = []
    for token in sorted(set(cited(open(_DOC).read()))):
        if file_names(token) or token.startswith("-") or " " in token:
            continue
        # `gov->held_cpus`, `gov_task_add/remove`, `$SQUALL_PARENT_FD`, `sq_config_*`
        for name in re.split(r"->|\.", token.lstrip("$")):
            first, *rest = name.split("/")
            alternatives = [first] + [re.sub(r"[^_]*$", "", first) + r for r in rest]
            for alt in alternatives:
                if "_" not in alt.strip("_") or not re.fullmatch(r"\w+\*?", alt):
                    continue
                if alt.endswith("*"):
                    ok = any(w.startswith(alt[:-1]) for w in words)
                else:
                    ok = alt in words
                if not ok:
                    wrong.append("`%s`: %s is in no source file: write its current name or drop it"
                                 % (token, alt))
    assert not wrong, "docs/architecture.md cites names that are not in the code:\n" + "\n".join(wrong)


def test_statics_are_cited_beside_their_file():
    """`s_name` is static in some file: the paragraph or table row citing it
    must name a file that has it."""
    text = open(_DOC).read()
    paths = {}                  # file name -> its paths (main.c is in two directories)
    for p in _all_sources():
        paths.setdefault(os.path.basename(p), []).append(p)
    wrong = []
    for chunk in re.split(r"\n\s*\n|\n(?=\|)|\n(?=\d+\. )|\n(?=- )", text):
        statics = [t for t in cited(chunk) if re.fullmatch(r"s_\w+", t)]
        if not statics:
            continue
        files = [n for t in cited(chunk) for n in file_names(t) or []]
        for name in statics:
            holders = [f for f in files for p in paths.get(os.path.basename(f), [])
                       if re.search(r"\b%s\b" % name, open(p).read())]
            if not holders:
                defined = [os.path.relpath(p, _ROOT) for ps in paths.values() for p in ps
                           if re.search(r"^%s \(" % name, open(p).read(), re.M)]
                wrong.append("`%s` is cited beside %s, none of which has it; it is in %s: cite that file beside it"
                             % (name, ", ".join(files) or "no file", ", ".join(defined) or "no file"))
    assert not wrong, "docs/architecture.md:\n" + "\n".join(wrong)


def test_every_message_is_named():
    table = open(os.path.join(_ROOT, "common", "proto_messages.def")).read()
    names = re.findall(r"^SQ_(?:MSG|BEGIN|REQUEST|BATCH) \((\w+), \d+", table, re.M)
    assert "HELLO" in names and "PUT" in names
    common = sections()["common"]
    missing = [n for n in names if not re.search(r"\b%s\b" % n.replace("_", "[_ ]"), common)]
    assert not missing, ("docs/architecture.md: the `## common/` table's proto row names no %s: "
                         "add each to the list of the proto file that encodes it" % ", ".join(missing))


def test_no_file_header_gives_its_length():
    stale = []
    for d in _SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(_ROOT, d)):
            for f in files:
                path = os.path.join(dirpath, f)
                if not f.endswith((".c", ".h", ".py", ".sh")):
                    continue
                head = open(path, errors="replace").read(3000)
                for m in re.finditer(r"about [\d ,]+ lines", head):
                    stale.append("%s: \"%s\" in its header: drop the figure"
                                 % (os.path.relpath(path, _ROOT), m.group(0)))
    assert not stale, "\n".join(stale)
