"""docs/protocol.md is enough to write a client: its Python sketch (section
12), written with pyzmq and msgpack and nothing of squall's, is taken from the
document as it stands and run against a real cluster with keys: a result
inline and one read from a governor with a capability, a resumed session, a
stranger's key that gets nothing, and another tenant that cannot resume a
session even with its token."""
import os
import re
import signal
import time
import types

import msgpack
import pytest
import zmq

import squall
from conftest import cluster_options

_DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "protocol.md")


def _sketch():
    text = open(_DOC, encoding="utf-8").read()
    section = text[text.index("## 12. A client in Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    module = types.ModuleType("protocol_doc_sketch")
    exec(compile(code, "docs/protocol.md#12", "exec"), module.__dict__)
    return module


sketch = _sketch()


@pytest.fixture(scope="module")
def keyed():
    c = squall.LocalCluster(governors=2, cpus=1, **cluster_options())
    with c:
        yield c


def _client(cluster, secret_key=None):
    return sketch.Client(cluster.address, secret_key=secret_key or cluster.secret_key,
                         broker_key=cluster.broker_key)


def test_inline_result(keyed):
    c = _client(keyed)
    try:
        assert len(c.cluster) == 32 and c.epoch >= 1
        assert sketch.run(c, b"hello, squall\n") == b"hello, squall\n"
    finally:
        c.close()


def test_result_on_a_governor_with_a_capability(keyed):
    data = os.urandom(100_000)          # above inline_max: FETCH gives a where
    c = _client(keyed)
    try:
        session, token = c.call([10, None])
        c.call([12, None, session,
                [[1, 0, "", 1, ""], [3, 1, "", -1, ""]],
                [[2, "concat", [1], [3], None, None, 0, 0, 0, ""]]], payloads=[data])
        c.call([15, None, session, 1, [2], 10000])
        body = c.call([16, None, session, 3, 10000])
        size, _, (governor, endpoint, serve_key, capability) = body
        assert size == len(data) and len(serve_key) == 32 and len(capability) == 41
        assert c.fetch(session, 3) == data
        # the same read without the capability is refused by the governor
        g = c.dealer(sketch.z85.encode(serve_key))
        g.connect(endpoint)
        with pytest.raises(sketch.SquallError) as denied:
            c.call([70, None, session << 32 | 3, None], sock=g)
        g.close()
        assert denied.value.code == 24
    finally:
        c.close()


def test_resume_after_a_lost_connection(keyed):
    c = _client(keyed)
    session, token = c.call([10, None])
    c.call([12, None, session,
            [[1, 0, "", 1, ""], [3, 1, "", -1, ""]],
            [[2, "concat", [1], [3], None, None, 0, 0, 0, ""]]], payloads=[b"kept"])
    cluster_id = c.cluster
    c.sock.close()                      # no BYE: the connection is just gone
    d = _client(keyed)
    try:
        assert d.cluster == cluster_id
        assert d.call([20, None, session, token]) == [3]
        assert d.fetch(session, 3) == b"kept"
        with pytest.raises(sketch.SquallError) as wrong:
            d.call([20, None, session, bytes(16)])
        assert wrong.value.code == 24
    finally:
        d.close()


def _unwelcomed(cluster, key_file):
    """A sketch client connected with this key, before its HELLO."""
    c = sketch.Client.__new__(sketch.Client)
    c.ctx = zmq.Context.instance()
    c.keys = sketch.load_key(key_file)
    c.reqs = iter(range(1, 100))
    c.sock = c.dealer(sketch.load_key(cluster.broker_key)[0])
    c.sock.connect(cluster.address)
    return c


def test_a_stranger_gets_nothing(keyed, tmp_path):
    stranger = squall.keygen("stranger", str(tmp_path), "client")
    c = _unwelcomed(keyed, stranger)
    with pytest.raises(TimeoutError):
        c.call([1, None, 2, "client", "stranger"], timeout_ms=1500)
    c.sock.close()


def test_another_tenant_cannot_resume(keyed):
    c = _client(keyed)
    session, token = c.call([10, None])
    authorized = keyed._keys["authorized"]
    other = squall.keygen("othertenant", authorized, "client", "elsewhere")
    keyed.broker.send_signal(signal.SIGHUP)
    # the reload is the broker's own business: retry the handshake until the
    # new key is in, with a deadline
    deadline = time.monotonic() + 20
    while True:
        try:
            d = _unwelcomed(keyed, other)
            d.client_id, d.inline_max, d.cluster, d.epoch, d.tenant = \
                d.call([1, None, 2, "client", "other"], timeout_ms=1000)
            break
        except TimeoutError:
            d.sock.close()
            assert time.monotonic() < deadline, "the broker did not take the new key"
    try:
        assert d.tenant == "elsewhere"
        # another tenant's session answers as one that does not exist
        with pytest.raises(sketch.SquallError) as denied:
            d.call([20, None, session, token])
        with pytest.raises(sketch.SquallError) as unknown:
            d.call([20, None, session + 1000, token])
        assert denied.value.code == unknown.value.code == 11
        assert re.sub(r"session \d+", "session N", str(denied.value)) == \
            re.sub(r"session \d+", "session N", str(unknown.value))
        assert "elsewhere" not in str(denied.value)
        with pytest.raises(sketch.SquallError) as denied:
            d.call([15, None, session, 0, [], 1000])
        with pytest.raises(sketch.SquallError) as unknown:
            d.call([15, None, session + 1000, 0, [], 1000])
        assert denied.value.code == unknown.value.code == 11
        assert re.sub(r"session \d+", "session N", str(denied.value)) == \
            re.sub(r"session \d+", "session N", str(unknown.value))
    finally:
        d.close()
        c.close()


def test_the_documented_bytes_are_what_msgpack_makes():
    """The example exchange's plain hex dumps are exactly msgpack's encoding
    (smallest widths) of the messages the text says they are."""
    text = open(_DOC, encoding="utf-8").read()
    blocks = [" ".join(b.split()) for b in re.findall(r"```\n(.*?)```", text, re.S)]
    dumps = {b for b in blocks if re.fullmatch(r"[0-9a-f]{2}( [0-9a-f]{2})*", b)}

    def hexed(message):
        return " ".join("%02x" % b for b in msgpack.packb(message))

    cluster = "3f2a9c0e5b7d41e8a6c2f09d8b1e4a77"
    assert hexed([1, 1, 2, "governor", "gov1", 1732180000123, "tcp://10.0.0.5:41001",
                  "tcp://10.0.0.5:41002", {"cpus": 2}, None]) in dumps
    assert hexed([2, 1, 0, [1, 1000, 4096, cluster, 1, False, None, 1732180000456]]) in dumps
    assert hexed([2, 2, 0, [1, bytes(range(0xa0, 0xb0))]]) in dumps
    assert hexed([2, 9, 0, [3]]) in text
    gread = hexed([71, 7, 0x100000003, 0, 4194304, None])
    assert gread[:35] in text and gread[36:] in text
