"""docs/protocol.md agrees with the message table, common/proto_messages.def,
from which the codec is made: every message of the table is in the document
with its number, and every message the table lays out field by field (flat
messages and client requests) has a layout `[number, field, ...]` in the
document, next to its name, whose field names are the table's in order.
Nothing of squall runs: the table is read as text."""
import os
import re
import sys

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
_TABLE = os.path.join(_ROOT, "common", "proto_messages.def")
_DOC = os.path.join(_ROOT, "docs", "protocol.md")


def table():
    """[(name, number, fields or None, request)], fields as [(name, optional)]"""
    text = open(_TABLE, encoding="utf-8").read()
    text = text[text.index("*/"):]         # the rows, after the header's example rows
    messages, current = [], None
    for line in text.splitlines():
        m = re.match(r"SQ_(MSG|BEGIN|REQUEST) \((\w+), (\d+)", line)
        if m:
            laid_out = m.group(1) != "MSG"
            current = (m.group(2), int(m.group(3)), [] if laid_out else None,
                       m.group(1) == "REQUEST")
            messages.append(current)
            continue
        m = re.match(r"\s+SQ_F(B|OPT)? \((\w+), (\w+), (\w+), \"([^\"]+)\"", line)
        if m:
            assert current and current[2] is not None and m.group(2) == current[0], \
                "proto_messages.def: a field row of %s outside its message: %s" % (m.group(2), line)
            current[2].append((m.group(5), m.group(1) == "OPT"))
            continue
        # a field row in full (an optional one with bounds): its last argument
        m = re.match(r"\s+SQ_FIELD \((\w+), (\w+), (\w+), \"([^\"]+)\",.*, ([01])\)", line)
        if m:
            assert current and current[2] is not None and m.group(1) == current[0], \
                "proto_messages.def: a field row of %s outside its message: %s" % (m.group(1), line)
            current[2].append((m.group(4), m.group(5) == "1"))
    return messages


def layouts(doc, number):
    """Every backticked layout [number, ...] of the document, with the text
    just before it: [(names, before)]."""
    found = []
    for m in re.finditer(r"`\[%d(\]|,[^`]*\])`" % number, doc):
        inner = m.group(0)[2:-2]
        depth, parts, part = 0, [], ""
        for c in inner:
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
            if c == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += c
        parts.append(part)
        names = [p.split(":")[0].strip() for p in parts[1:]]
        found.append((names, doc[max(0, m.start() - 80):m.start()]))
    return found


def test_the_table_reads():
    messages = table()
    names = [m[0] for m in messages]
    numbers = [m[1] for m in messages]
    assert "HELLO" in names and "CHUNK" in names and "RESTART" in names
    assert len(set(names)) == len(names), "a message named twice in the table"
    assert len(set(numbers)) == len(numbers), "a message number used twice in the table"
    assert all(m[2] for m in messages if m[0] in ("CHUNK", "LOAD", "KEEP"))


def test_every_message_is_in_the_document_with_its_number():
    doc = open(_DOC, encoding="utf-8").read()
    missing = []
    for name, number, _, _ in table():
        near = [before for _, before in layouts(doc, number)
                if re.search(r"\b%s\b" % name, before)]
        field_table = re.search(r"\| 0 \| type \| uint \| %d \|" % number, doc)
        if not near and not field_table:
            missing.append("%s: no layout `[%d, ...]` next to its name" % (name, number))
    assert not missing, "docs/protocol.md:\n" + "\n".join(missing)


def test_every_layout_of_the_table_is_the_documents():
    doc = open(_DOC, encoding="utf-8").read()
    wrong = []
    for name, number, fields, request in table():
        if fields is None:
            continue
        want = (["req"] if request else []) + [f for f, _ in fields]
        found = [names for names, before in layouts(doc, number)
                 if re.search(r"\b%s\b" % name, before)]
        if want not in found:
            wrong.append("%s: the table says [%d, %s], the document %s"
                         % (name, number, ", ".join(want),
                            " or ".join("[%d, %s]" % (number, ", ".join(f)) for f in found)
                            or "has no layout"))
    assert not wrong, "docs/protocol.md and common/proto_messages.def differ:\n" + "\n".join(wrong)


def test_a_changed_table_is_caught(tmp_path, monkeypatch):
    """The check fails when the table has a field the document lacks."""
    text = open(_TABLE, encoding="utf-8").read()
    changed = text.replace('SQ_F (CREDIT, U32, credits, "credits")',
                           'SQ_F (CREDIT, U32, credits, "credits")\n'
                           '    SQ_F (CREDIT, U32, window, "window")')
    assert changed != text
    path = tmp_path / "proto_messages.def"
    path.write_text(changed)
    monkeypatch.setattr(sys.modules[__name__], "_TABLE", str(path))
    try:
        test_every_layout_of_the_table_is_the_documents()
    except AssertionError as e:
        assert "CREDIT" in str(e) and "window" in str(e)
    else:
        raise AssertionError("a field missing from the document was not caught")
