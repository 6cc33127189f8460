"""docs/protocol.md agrees with the message table, common/proto_messages.def,
from which the codec is made: every message of the table is in the document
with its number; every message the table lays out field by field (flat
messages, client requests, batches of records, UPDATE's events) has a layout
`[number, field, ...]` (a batch `[number, [[field, ...]...]]`) in the
document, next to its name, whose field names are the table's in order and
whose types, where the layout gives them, are those of the table's kinds;
and the document's appendix lists every field of the table with its kind
and its bounds, as the codec checks them. Nothing of squall runs: the table
is read as text, its constants from common/*.h."""
import glob
import os
import re
import sys

import pytest

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
_TABLE = os.path.join(_ROOT, "common", "proto_messages.def")
_DOC = os.path.join(_ROOT, "docs", "protocol.md")
_APPENDIX = "## Appendix: the fields of the codec's table"

#  The types a layout may give a field of each kind
_TYPES = {
    "U32": {"u32", "uint"},
    "U64": {"uint", "key", "u64"},
    "I64": {"i64", "int"},
    "BOOL": {"bool"},
    "STR": {"str"},
    "NAME": {"str"},
    "BIN": {"bin"},
    "OBIN": {"bin or nil", "bin|nil"},
    "IDS": {"array of u32", "[u32...]"},
    "JOB": {"str or nil", "str|nil"},
    "OSTR": {"str or nil", "str|nil"},
    "OU32": {"u32 or nil", "u32|nil", "uint or nil", "uint|nil"},
    "OU64": {"uint or nil", "uint|nil"},
    "OINT": {"int or nil", "int|nil", "i32 or nil", "i32|nil"},
    "ESTR": {"str or nil", "str|nil"},
    "TSTATE": {"str"},
    "OWHERE": {"where", "where or nil", "where|nil"},
    "WHERE": {"where"},
    "RESOURCES": {"map str→uint, or nil", "map or nil"},
    "PREVIOUS": {"nil, or `[cluster: str, governor_id: u32]`"},
    "KEYLIST": {"[bin...]", "array of bin"},
    "OPTIONS": {"map"},
    "EXIT": {"i32"},
    "OUTPUTS": None,            # its layout follows the event's: any
    "RESULTS": None,
    "RAW": {"any"},
    "INPUTS": None,             # ASSIGN's lists: laid out below its table
    "OUTDECLS": None,
    "I32": {"i32"},             # SUBMIT's (its object and task tables)
    "FRAME": {"i64 or array"},
    "IDLIST": {"array of u32"},
    "RESLIST": {"map str→uint, or nil"},
    "ARRAY": {"nil, `[first: uint, last: uint, step: uint]`, or array of str"},
    "TOPTIONS": {"map"},
    "OBJECTS": {"array of *object*"},
    "TASKS": {"array of *task*"},
    "BODY": {"any"},            # REPLY's
}


def compatible(field, typ):
    """Whether a layout's type for a field of the table is its kind's: a
    U64 bounded to 32 bits may say u32, a BIN of exactly n bytes bin n."""
    kind = field["kind"]
    if _TYPES[kind] is None or typ in _TYPES[kind]:
        return True
    if kind == "U64" and field["max"] and field["max"] <= 0xffffffff and typ == "u32":
        return True
    return kind == "BIN" and field["min"] and typ == "bin %d" % field["min"]


def constants():
    """The numbers the table's bounds name: #defines and enum members of
    common/*.h, and the C limits it uses."""
    raw = {"UINT32_MAX": "4294967295", "INT32_MAX": "2147483647", "INT32_MIN": "(-2147483648)",
           "NULL": "0"}
    for path in glob.glob(os.path.join(_ROOT, "common", "*.h")):
        for line in open(path, encoding="utf-8"):
            m = (re.match(r"#define (SQ_\w+) +([^/]+?)\s*(//.*)?$", line)
                 or re.match(r"\s+(SQ_\w+) = ([^,/]+?),?\s*(//.*)?$", line))
            if m:
                raw.setdefault(m.group(1), m.group(2))
    return raw


def value(text, raw, depth=0):
    """A bound of the table as a number (C constants, u suffixes, shifts)."""
    text = text.strip()
    if depth > 8:
        raise ValueError(text)
    text = re.sub(r"\b(SQ_\w+|UINT32_MAX|INT32_MAX|INT32_MIN)\b",
                  lambda m: "(%d)" % value(raw[m.group(1)], raw, depth + 1), text)
    text = re.sub(r"\b(\d+)(u|ull|ul|ll)\b", r"\1", text, flags=re.I)
    if not re.match(r"^[\d\s()+\-*<>]+$", text):
        raise ValueError("not a number the test can read: %s" % text)
    return int(eval(text, {"__builtins__": {}}))


def table():
    """{"messages": [(name, number, fields or None, request, record or None)],
        "records": {name: fields}, "bare": {names of bare records},
        "events": [(name, number, fields)]},
    fields as dicts (name, kind, min, max, optional), bounds as numbers."""
    text = open(_TABLE, encoding="utf-8").read()
    text = text[text.index("*/"):]         # the rows, after the header's example rows
    raw = constants()
    messages, records, events, current, fields = [], {}, [], None, None
    bare = set()
    for line in text.splitlines():
        line = re.sub(r"\s*//.*$", "", line)
        m = re.match(r"SQ_(MSG|BEGIN|BEGIN_IN|REQUEST) \((\w+), (\d+)", line)
        if m:
            fields = [] if m.group(1) != "MSG" else None
            current = m.group(2)
            messages.append((current, int(m.group(3)), fields, m.group(1) == "REQUEST", None))
            continue
        m = re.match(r"SQ_BATCH \((\w+), (\d+), (\w+)\)", line)
        if m:
            current, fields = None, None
            messages.append((m.group(1), int(m.group(2)), None, False, m.group(3)))
            continue
        m = re.match(r"SQ_EVENT \((EV_\w+), (\d+)\)", line)
        if m:
            current, fields = m.group(1), []
            events.append((current[3:], int(m.group(2)), fields))
            continue
        m = re.match(r"SQ_RECORD(_IN|_BARE)? \((\w+),", line)
        if m:
            current, fields = m.group(2), []
            records[current] = fields
            if m.group(1) == "_BARE":
                bare.add(current)
            continue
        m = re.match(r"\s+SQ_F(B|OPT)? \((\w+), (\w+), (\w+), \"([^\"]+)\"(.*)\)", line)
        if m:
            assert fields is not None and m.group(2) == current, \
                "proto_messages.def: a field row of %s outside its message: %s" % (m.group(2), line)
            lo = hi = 0
            if m.group(1) == "B":
                args = [a.strip() for a in re.split(r",(?![^(]*\))", m.group(6))][1:]
                lo, hi = value(args[0], raw), value(args[1], raw)
            fields.append({"name": m.group(5), "kind": m.group(3), "min": lo, "max": hi,
                           "optional": m.group(1) == "OPT"})
            continue
        # a field row in full (an optional one with bounds): its last argument
        m = re.match(r"\s+SQ_FIELD \((\w+), (\w+), (\w+), \"([^\"]+)\",(.*), ([01])\)", line)
        if m:
            assert fields is not None and m.group(1) == current, \
                "proto_messages.def: a field row of %s outside its message: %s" % (m.group(1), line)
            args = [a.strip() for a in re.split(r",(?![^(]*\))", m.group(5))]
            fields.append({"name": m.group(4), "kind": m.group(2), "min": value(args[0], raw),
                           "max": value(args[1], raw), "optional": m.group(6) == "1"})
    for name, _, _, _, record in messages:
        assert record is None or record in records, \
            "proto_messages.def: %s is a batch of %s, which is no record" % (name, record)
    assert all(len(records[name]) == 1 for name in bare), \
        "proto_messages.def: a bare record of other than one field"
    return {"messages": messages, "records": records, "bare": bare, "events": events}


def split(inner):
    """The top-level parts of a layout's inside, split at commas."""
    depth, parts, part = 0, [], ""
    for c in inner:
        if c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += c
    parts.append(part)
    return [p.strip() for p in parts]


def named(parts):
    """[(name, type or None)] of `name: type` parts"""
    out = []
    for p in parts:
        name, _, kind = p.partition(":")
        out.append((name.strip(), kind.strip() or None))
    return out


def layouts(doc, number):
    """Every backticked layout [number, ...] of the document, with the text
    just before it: [(parts after the number, before)]."""
    found = []
    for m in re.finditer(r"`\[%d(\]|,[^`]*\])`" % number, doc):
        found.append((split(m.group(0)[2:-2])[1:], doc[max(0, m.start() - 80):m.start()]))
    return found


def wanted(message, t):
    """The names and kinds the document's layout of a message must have:
    [(name, kind)]; a batch's are its record's."""
    name, number, fields, request, record = message
    if record:
        return t["records"][record]
    req = {"name": "req", "kind": "U32", "min": 0, "max": 0, "optional": False}
    return ([req] if request else []) + fields


def documented(message, doc, bare=()):
    """The layouts of the message in the document, next to its name, as
    [(name, type)]; a batch's: those of its element (`[[field, ...]...]`,
    of a bare record `[field...]`)."""
    name, number, fields, request, record = message
    out = []
    for parts, before in layouts(doc, number):
        if not re.search(r"\b%s\b" % name, before):
            continue
        if record:
            shape = r"^\[([^\[\],]*)\.\.\.\]$" if record in bare else r"^\[\[(.*)\]\.\.\.\]$"
            m = re.match(shape, parts[0]) if len(parts) == 1 else None
            if m:
                out.append(named(split(m.group(1))))
        else:
            out.append(named(parts))
    return out


def bounds(f):
    """A field's bounds as the appendix says them"""
    kind, lo, hi = f["kind"], f["min"], f["max"]
    if kind in ("STR", "NAME", "OSTR", "ESTR"):
        return "at most %d bytes" % (hi or value("SQ_MAX_NAME", constants()))
    if kind == "RAW":
        return "at most %d bytes" % hi if hi else ""
    if kind in ("BIN", "OBIN"):
        return "exactly %d bytes" % lo if lo else "at most %d bytes" % hi if hi else ""
    if kind == "IDS":
        return "%d to %d ids" % (lo, hi) if hi else ""
    return "%d to %d" % (lo, hi) if hi else ""


def appendix(t):
    """The appendix's table rows the table makes, in its order"""
    rows = []
    for name, _, fields, _, _ in t["messages"]:
        for f in fields or []:
            rows.append((name, f))
    for name, fields in t["records"].items():
        for f in fields:
            rows.append((name, f))
    for name, _, fields in t["events"]:
        for f in fields:
            rows.append(("EV_" + name, f))
    return ["| %s | %s | %s | %s |" % (name, f["name"],
                                        f["kind"] + (", optional" if f["optional"] else ""),
                                        bounds(f)) for name, f in rows]


def test_the_table_reads():
    t = table()
    names = [m[0] for m in t["messages"]]
    numbers = [m[1] for m in t["messages"]]
    assert "HELLO" in names and "CHUNK" in names and "RESTART" in names and "STOP" in names
    assert len(set(names)) == len(names), "a message named twice in the table"
    assert len(set(numbers)) == len(numbers), "a message number used twice in the table"
    assert all(m[2] for m in t["messages"] if m[0] in ("CHUNK", "LOAD", "KEEP"))
    assert [f["name"] for f in t["records"]["STOP_TASK"]] == ["task", "attempt"]
    wait = [m for m in t["messages"] if m[0] == "WAIT"][0]
    assert wait[2][1] == {"name": "mode", "kind": "U32", "min": 0, "max": 2, "optional": False}
    assert all(f["kind"] in _TYPES for fs in t["records"].values() for f in fs)
    assert [n for n, _, _ in t["events"]][:3] == ["FINISHED", "FAILED", "STARTED"]
    failed = t["events"][1][2]
    assert failed[-1]["kind"] == "EXIT" and failed[-1]["optional"]


def test_every_message_is_in_the_document_with_its_number():
    doc = open(_DOC, encoding="utf-8").read()
    missing = []
    for name, number, _, _, _ in table()["messages"]:
        near = [before for _, before in layouts(doc, number)
                if re.search(r"\b%s\b" % name, before)]
        field_table = re.search(r"\| 0 \| type \| uint \| %d \|" % number, doc)
        if not near and not field_table:
            missing.append("%s: no layout `[%d, ...]` next to its name" % (name, number))
    assert not missing, "docs/protocol.md:\n" + "\n".join(missing)


def test_every_layout_of_the_table_is_the_documents():
    """Names in order; and a type the layout gives is the kind's"""
    doc = open(_DOC, encoding="utf-8").read()
    t = table()
    wrong = []
    events = [(name, number, fields, False, None) for name, number, fields in t["events"]]
    for message in t["messages"] + events:
        name, number, fields, _, record = message
        if fields is None and record is None:
            continue
        want = wanted(message, t)
        found = documented(message, doc, t["bare"])
        names = [f["name"] for f in want]
        same = [got for got in found if [n for n, _ in got] == names]
        if not same:
            shape = ("[%d, [%s...]]" if record in t["bare"] else "[%d, [[%s]...]]") \
                if record else "[%d, %s]"
            wrong.append("%s: the table says %s, the document %s"
                         % (name, shape % (number, ", ".join(names)),
                            " or ".join(str([n for n, _ in f]) for f in found) or "has no layout"))
            continue
        for got in same:
            for f, (_, typ) in zip(want, got):
                if typ is not None and not compatible(f, typ):
                    wrong.append("%s: field %s is %s in the table (%s), the document says %s"
                                 % (name, f["name"], f["kind"],
                                    " or ".join(sorted(_TYPES[f["kind"]] or ())), typ))
    assert not wrong, "docs/protocol.md and common/proto_messages.def differ:\n" + "\n".join(wrong)


def test_the_appendix_is_the_table():
    """Every field of the table, its kind and bounds, in the table's order"""
    doc = open(_DOC, encoding="utf-8").read()
    assert _APPENDIX in doc, "docs/protocol.md has no section '%s'" % _APPENDIX
    section = doc[doc.index(_APPENDIX):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    have = [line.strip() for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| message |")]
    want = appendix(table())
    if have != want:
        extra = [r for r in have if r not in want]
        lacking = [r for r in want if r not in have]
        raise AssertionError(
            "docs/protocol.md's appendix and common/proto_messages.def differ:\n"
            "not in the table: %s\nnot in the document: %s\n"
            "the appendix's rows, as the table makes them:\n%s"
            % ("\n  ".join([""] + extra) or "none", "\n  ".join([""] + lacking) or "none",
               "\n".join(want)))


def maps():
    """{name: [(key, how, with)]} of the table's maps (SQ_MAP rows), keys in
    the order they are packed"""
    text = open(_TABLE, encoding="utf-8").read()
    text = text[text.index("*/"):]
    out, current = {}, None
    for line in text.splitlines():
        line = re.sub(r"\s*//.*$", "", line)
        m = re.match(r"SQ_MAP(?:_RW)? \((\w+),", line)
        if m:
            current = m.group(1)
            out[current] = []
            continue
        m = re.match(r"\s+SQ_KEY \((\w+), (\w+), \w+, \w+, \"([^\"]+)\", (\w+)\)", line)
        if m:
            assert m.group(1) == current, \
                "proto_messages.def: a key row of %s outside its map: %s" % (m.group(1), line)
            out[current].append((m.group(3), m.group(2), m.group(4)))
    return out


def _keys_of(name, all_maps):
    """A map's keys, and those of the maps of the same struct it holds (SUB)"""
    keys = []
    for key, how, with_ in all_maps[name]:
        keys.append(key)
        if how == "SUB":
            keys += _keys_of(with_, all_maps)
    return keys


def test_the_keys_of_info_are_the_documents():
    """INFO's table in the document has a row for every key of the INFO map
    and none besides; the row of a key that holds maps (governors, tenant,
    ...) names every key of them"""
    doc = open(_DOC, encoding="utf-8").read()
    start = doc.index("### INFO `[18, req]`")
    section = doc[start:doc.index("\n### ", start + 1)]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `(\w+)` \|", line)
        if m:
            rows[m.group(1)] = line
    all_maps = maps()
    info = all_maps["INFO"]
    wrong = []
    if set(rows) != {key for key, _, _ in info}:
        wrong.append("INFO's keys: the table has %s, the document %s"
                     % (sorted(k for k, _, _ in info), sorted(rows)))
    for key, how, with_ in info:
        if how in ("LIST", "OMAP") and key in rows:
            lacking = [k for k in _keys_of(with_, all_maps) if "`%s`" % k not in rows[key]]
            if lacking:
                wrong.append("INFO's %s (%s): the document does not name %s"
                             % (key, with_, ", ".join(lacking)))
    assert not wrong, "docs/protocol.md and common/proto_messages.def differ:\n" + "\n".join(wrong)


#  The types the document may give a key of a read map, by its HOW
_MAP_TYPES = {"UINT": {"u32", "uint"}, "BOOL": {"bool"}, "OU64": {"uint or nil"},
              "ESTR": {"str or nil"}, "JSTATE": {"str"}, "TCOUNTS": {"map str→uint"}}


def test_the_job_map_is_the_documents():
    """The job's table in the document: the JOB map's keys in order, each
    with a type of its HOW"""
    doc = open(_DOC, encoding="utf-8").read()
    start = doc.index("A *job* (in SESSIONS and SESSION_WAIT replies) is a map")
    section = doc[start:doc.index("\n### ", start)]
    rows = [(m.group(1), m.group(2).strip()) for m in
            re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)]
    job = maps()["JOB"]
    assert [k for k, _ in rows] == [k for k, _, _ in job], \
        "docs/protocol.md's job map has keys %s, the table %s" \
        % ([k for k, _ in rows], [k for k, _, _ in job])
    wrong = ["%s: %s in the table, the document says %s" % (key, how, typ)
             for (key, how, _), (_, typ) in zip(job, rows) if typ not in _MAP_TYPES[how]]
    assert not wrong, "docs/protocol.md's job map and the table differ:\n" + "\n".join(wrong)


def _changed(tmp_path, monkeypatch, old, new):
    text = open(_TABLE, encoding="utf-8").read()
    changed = text.replace(old, new)
    assert changed != text
    path = tmp_path / "proto_messages.def"
    path.write_text(changed)
    monkeypatch.setattr(sys.modules[__name__], "_TABLE", str(path))


def _fails(check, *words):
    try:
        check()
    except AssertionError as e:
        assert all(w in str(e) for w in words), str(e)
    else:
        raise AssertionError("a table the document does not match was not caught")


#  A change of the table the document does not follow, and what the check
#  that must catch it says: (what, the row, changed to, the check, words)
_CHANGES = [
    ("a field the document lacks", 'SQ_F (CREDIT, U32, credits, "credits")',
     'SQ_F (CREDIT, U32, credits, "credits")\n    SQ_F (CREDIT, U32, window, "window")',
     "test_every_layout_of_the_table_is_the_documents", ("CREDIT", "window")),
    ("a kind: CREDIT's credits as a string, its layout says u32",
     'SQ_F (CREDIT, U32, credits, "credits")', 'SQ_F (CREDIT, STR, credits, "credits")',
     "test_every_layout_of_the_table_is_the_documents", ("CREDIT", "credits", "u32")),
    ("the same in the appendix", 'SQ_F (CREDIT, U32, credits, "credits")',
     'SQ_F (CREDIT, STR, credits, "credits")',
     "test_the_appendix_is_the_table", ("CREDIT | credits | STR",)),
    ("a kind of a batch's record", 'SQ_F (STOP_TASK, U32, attempt, "attempt")',
     'SQ_F (STOP_TASK, BOOL, attempt, "attempt")',
     "test_every_layout_of_the_table_is_the_documents", ("STOP", "attempt", "u32")),
    ("a bare record's field renamed: DROP's elements", 'SQ_F (DROP_KEY, U64, key, "object")',
     'SQ_F (DROP_KEY, U64, key, "key")',
     "test_every_layout_of_the_table_is_the_documents", ("DROP", "[42, [key...]]")),
    ("an event's field renamed", 'SQ_F (EV_HELD, U32, attempt, "version")',
     'SQ_F (EV_HELD, U32, attempt, "attempt")',
     "test_every_layout_of_the_table_is_the_documents", ("HELD", "attempt")),
    ("a bound: WAIT's mode up to 3, the document's up to 2",
     '0, SQ_WAIT_SOME, "unknown wait mode"', '0, SQ_WAIT_SOME + 1, "unknown wait mode"',
     "test_the_appendix_is_the_table", ("| WAIT | mode | U32 | 0 to 3 |",)),
    ("a key of INFO's governors the document lacks",
     'SQ_KEY (INFO_GOV, UINT, piped, 0, "piped", 0)', 'SQ_KEY (INFO_GOV, UINT, piped, 0, "pipes", 0)',
     "test_the_keys_of_info_are_the_documents", ("governors", "pipes")),
    ("a key of INFO the document lacks",
     'SQ_KEY (INFO, UINT, blocked, 0, "blocked", 0)', 'SQ_KEY (INFO, UINT, blocked, 0, "stuck", 0)',
     "test_the_keys_of_info_are_the_documents", ("stuck",)),
    ("a key of the tenant's limits the document lacks",
     'SQ_KEY (INFO_LIMITS, UINT, max_stored, 0, "stored", 0)',
     'SQ_KEY (INFO_LIMITS, UINT, max_stored, 0, "max_bytes", 0)',
     "test_the_keys_of_info_are_the_documents", ("tenant", "max_bytes")),
    ("a key of the job map renamed",
     'SQ_KEY (JOB, UINT, created_ms, 0, "created", 0)',
     'SQ_KEY (JOB, UINT, created_ms, 0, "opened", 0)',
     "test_the_job_map_is_the_documents", ("opened",)),
    ("a SUBMIT task's field renamed",
     'SQ_F (SUBMIT_TASK, U32, max_retries, "max_retries")',
     'SQ_F (SUBMIT_TASK, U32, max_retries, "retries")',
     "test_submit_is_the_table", ("task", "retries")),
    ("a SUBMIT object's field of another kind",
     'SQ_F (SUBMIT_OBJECT, U32, flags, "flags")', 'SQ_F (SUBMIT_OBJECT, STR, flags, "flags")',
     "test_submit_is_the_table", ("object", "flags", "STR")),
    ("a key of the job map of another type",
     'SQ_KEY (JOB, BOOL, attached, 0, "attached", 0)',
     'SQ_KEY (JOB, UINT, attached, 0, "attached", 0)',
     "test_the_job_map_is_the_documents", ("attached: UINT", "bool")),
]


@pytest.mark.parametrize("what, old, new, check, words", _CHANGES, ids=[c[0] for c in _CHANGES])
def test_a_changed_table_is_caught(tmp_path, monkeypatch, what, old, new, check, words):
    _changed(tmp_path, monkeypatch, old, new)
    _fails(globals()[check], *words)


def test_a_bare_batch_documented_as_records_is_caught(tmp_path, monkeypatch):
    """DROP's elements are bare keys: a layout of records is not DROP's"""
    text = open(_DOC, encoding="utf-8").read()
    changed = text.replace("`[42, [object: key...]]`", "`[42, [[object: key]...]]`")
    assert changed != text
    path = tmp_path / "protocol.md"
    path.write_text(changed)
    monkeypatch.setattr(sys.modules[__name__], "_DOC", str(path))
    _fails(test_every_layout_of_the_table_is_the_documents, "DROP", "[42, [object...]]")


def test_hello_is_the_table():
    """HELLO's fields after its role are the records HELLO_CLIENT and
    HELLO_GOVERNOR: the document's field tables (section 2's and section
    9's), its layouts and its counts of fields say the same."""
    doc = open(_DOC, encoding="utf-8").read()
    t = table()
    client, governor = t["records"]["HELLO_CLIENT"], t["records"]["HELLO_GOVERNOR"]
    head = 4                    # type, req, version, role

    def rows(after):
        """The rows `| # | field | type |` of the field table after a heading,
        from the role's first field on"""
        section = doc[doc.index(after) + len(after):]
        section = section[:section.index("\n\n", section.index("|---"))]
        return [(int(n), name, typ.strip()) for n, name, typ in
                re.findall(r"^\| (\d+) \| (\w+) \| ([^|]+) \|", section, re.M)
                if int(n) >= head]

    def agree(have, fields):
        assert [(n, name) for n, name, _ in have] == \
            [(head + i, f["name"]) for i, f in enumerate(fields)][-len(have):], have
        for (_, _, typ), f in zip(have, fields[-len(have):]):
            assert compatible(f, typ), "HELLO: field %s is %s in the table, %s in the document" \
                % (f["name"], f["kind"], typ)

    # Section 2 shows the fields both roles share (the client's), section 9
    # the governor's after them.
    agree(rows("HELLO `[1, req, version, role, name, ...]`:"), client)
    layout = re.search(r'### Governor HELLO `\[1, req, 2, "governor", ([^\]]*)\]`', doc)
    assert layout, "docs/protocol.md: no heading with the governor HELLO's layout"
    assert [x.strip() for x in layout.group(1).split(",")] == [f["name"] for f in governor]
    agree(rows(layout.group(0)), governor)
    assert governor[:len(client)] == client, "a governor's HELLO starts as a client's"
    for sent in re.findall(r'HELLO \[1, req, 2, "client", ([^\]]*)\]', doc):
        assert [x.strip() for x in sent.split(",")] == [f["name"] for f in client]
    assert "A client HELLO has exactly these %d fields. A governor HELLO has %d" \
        % (head + len(client), head + len(governor)) in doc


def test_submit_is_the_table():
    """SUBMIT is the table's message of the records SUBMIT_OBJECT and
    SUBMIT_TASK: the document's field tables of SUBMIT, its *object* and its
    *task* name the table's fields in order, with types of their kinds; the
    headings' layouts and the task's counts of fields say the same."""
    doc = open(_DOC, encoding="utf-8").read()
    t = table()
    submit = [m for m in t["messages"] if m[0] == "SUBMIT"][0]
    #  (SUBMIT's table begins with its type, row 0)
    parts = {"SUBMIT": ("### SUBMIT `[12, ", submit[2], 1),
             "object": ("*object* `[", t["records"]["SUBMIT_OBJECT"], 0),
             "task": ("*task* `[", t["records"]["SUBMIT_TASK"], 0)}
    wrong = []
    for what, (heading, fields, first) in parts.items():
        at = doc.index(heading)
        layout = doc[at + len(heading):doc.index("]`", at)]
        names = [f["name"] for f in fields]
        if [x.strip() for x in layout.split(",")] != names:
            wrong.append("%s: the table says %s, the document's heading %s" % (what, names, layout))
        section = doc[at:]
        section = section[:section.index("\n\n", section.index("|---"))]
        rows = [(int(n), name, typ.strip()) for n, name, typ in
                re.findall(r"^\| (\d+) \| (\w+) \| ([^|]+) \|", section, re.M) if int(n) >= first]
        if [name for _, name, _ in rows] != names:
            wrong.append("%s: the table's fields %s, the document's %s"
                         % (what, names, [name for _, name, _ in rows]))
            continue
        for (_, name, typ), f in zip(rows, fields):
            if not compatible(f, typ):
                wrong.append("%s: field %s is %s in the table, %s in the document"
                             % (what, name, f["kind"], typ))
    task = t["records"]["SUBMIT_TASK"]
    required = len([f for f in task if not f["optional"]])
    counts = "(%d elements, %d with `array`, or %d with" % (required, required + 1, len(task))
    if counts not in doc:
        wrong.append("task: the document does not say %s" % counts)
    assert not wrong, "docs/protocol.md and common/proto_messages.def differ:\n" + "\n".join(wrong)
