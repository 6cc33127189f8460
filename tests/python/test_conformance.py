"""Protocol conformance, written against docs/protocol.md and not against
libsquall: a client of its own (pyzmq and msgpack) sends every client
message to a real broker and governor (no keys, loopback) and checks each
documented reply and error code, byte for byte where the document gives
bytes. When the document and the broker disagree, this fails."""
import os
import re
import signal
import subprocess
import time

import msgpack
import pytest
import zmq

from conftest import cluster_options

_DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "protocol.md")
DOC = open(_DOC, encoding="utf-8").read()
TIMEOUT_MS = 20000


def pack(message):
    return msgpack.packb(message, use_bin_type=True)


def doc_dump(after):
    """The first plain hex dump (```-block of hex only) after `after`."""
    rest = DOC[DOC.index(after):]
    for block in re.findall(r"```\n(.*?)```", rest, re.S):
        text = " ".join(block.split())
        if re.fullmatch(r"[0-9a-f]{2}( [0-9a-f]{2})*", text):
            return bytes.fromhex(text)
    raise AssertionError("no dump after " + after)


def _binary(name):
    build = os.environ.get("SQUALL_BUILD_DIR")
    assert build, "SQUALL_BUILD_DIR is set by ctest"
    return os.path.join(build, "broker" if "broker" in name else "governor", name)


@pytest.fixture(scope="module")
def cluster():
    env = dict(os.environ)
    for k, v in cluster_options().get("env", {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    broker = subprocess.Popen([_binary("squall-broker"), "--listen", "tcp://127.0.0.1:*",
                               "--log-level", "error", "--upload-timeout-ms", "1000"],
                              stdout=subprocess.PIPE, text=True, env=env)
    line = broker.stdout.readline()
    assert line.startswith("LISTENING "), line
    endpoint = line.split()[1]
    governor = subprocess.Popen([_binary("squall-governor"), "--broker", endpoint, "--cpus", "2",
                                 "--name", "conformance", "--log-level", "error"],
                                stdout=subprocess.PIPE, text=True, env=env)
    assert governor.stdout.readline().startswith("READY"), "governor joined"
    yield endpoint
    governor.send_signal(signal.SIGINT)        # it leaves without draining
    broker.terminate()
    for p in (governor, broker):
        assert p.wait(30) == 0, "a clean stop"


class Peer:
    """A bare DEALER: sends frames, reads replies, nothing more."""

    def __init__(self, endpoint):
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)

    def send(self, message, *payloads, raw=None):
        self.sock.send_multipart([raw if raw is not None else pack(message)] + list(payloads))

    def recv(self, timeout_ms=TIMEOUT_MS):
        if not self.sock.poll(timeout_ms):
            raise TimeoutError
        return self.sock.recv_multipart()

    def call(self, message, *payloads, raw=None, timeout_ms=TIMEOUT_MS):
        self.send(message, *payloads, raw=raw)
        frames = self.recv(timeout_ms)
        head = msgpack.unpackb(frames[0])
        assert head[0] == 2 and len(head) == 4, head
        return head, frames

    def ok(self, message, *payloads):
        head, frames = self.call(message, *payloads)
        assert head[2] == 0, head
        return head[3], frames[1:]

    def error(self, message, code, *payloads, raw=None):
        head, frames = self.call(message, *payloads, raw=raw)
        assert head[2] == code, head
        body = head[3]
        assert isinstance(body, list) and len(body) == 3 and isinstance(body[0], str), body
        return body

    def close(self):
        self.sock.close()


def hello(endpoint, name="conformance"):
    p = Peer(endpoint)
    body, _ = p.ok([1, 1, 2, "client", name])
    assert len(body) == 5 and body[1] == 4096 and re.fullmatch(r"[0-9a-f]{32}", body[2])
    assert body[3] >= 1 and body[4] is None        # epoch; no tenant without keys
    return p, body


def test_the_example_exchange_byte_for_byte(cluster):
    p = Peer(cluster)
    p.send([1, 1, 2, "client", "example"])
    (reply,) = p.recv()
    welcome = msgpack.unpackb(reply)[3]
    assert reply == pack([2, 1, 0, welcome]) and reply[:5] == bytes.fromhex("94 02 01 00 95")
    p.send([10, 2])
    (reply,) = p.recv()
    session, token = msgpack.unpackb(reply)[3]
    assert reply == pack([2, 2, 0, [session, token]]) and len(token) == 16
    # the SUBMIT of the document, for its session 1, is the documented dump
    objects = [[1, 0, "text/plain", 1, "greeting"], [3, 1, "text/plain", -1, ""]]
    tasks = [[2, "concat", [1], [3], None, None, 0, 0, 0, "join"]]
    assert pack([12, 3, 1, objects, tasks]) == doc_dump("Complete frame 0 as one dump")
    p.send([12, 3, session, objects, tasks], b"hello, squall\n")
    assert p.recv() == [bytes.fromhex("94 02 03 00 c0")]
    p.send([15, 4, session, 1, [2], 10000])
    assert p.recv() == [bytes.fromhex("94 02 04 00 93 01 00 91 94 02 01 c0 c0")]
    p.send([16, 5, session, 3, 10000])
    assert p.recv() == [bytes.fromhex("94 02 05 00 93 0e aa 74 65 78 74 2f 70 6c 61 69 6e c0"),
                        b"hello, squall\n"]
    # the documented error, word for word but the session's number
    p.send([12, 6, session, [[5, 0, "", -1, ""]], [[4, "concat", [9], [5], None, None, 0, 0, 0, ""]]])
    (reply,) = p.recv()
    message = ("task 4: input 9 is not an object of session %d (never declared, or already "
               "released because nobody kept it)" % session)
    assert reply == pack([2, 6, 6, [message, 4, None]])
    if session == 1:
        assert len(reply) == 115
    p.ok([11, 7, session])
    p.close()


def test_handshake_errors(cluster):
    p = Peer(cluster)
    body = p.error([10, 1], 3)                             # before HELLO
    assert "HELLO" in body[0]
    body = p.error([1, 2, 1, "client", "old"], 2)          # another version
    assert body[0] == "protocol version 1 is not supported: this peer speaks version 2"
    body = p.error([1, 3, 2, "client"], 1)                 # 4 fields: malformed
    assert body[0].startswith("HELLO: field 'message': wrong number of fields"), body[0]
    body = p.error([1, 3, 2, "client", "x", "extra"], 1)   # 6: the count, not 'role'
    assert body[0].startswith("HELLO: field 'message': wrong number of fields"), body[0]
    p.ok([1, 4, 2, "client", "late"])
    p.error([1, 5, 2, "client", "again"], 3)               # a second HELLO
    p.close()


def test_every_client_request(cluster):
    p, welcome = hello(cluster)
    assert p.ok([19, 2]) == (None, [])                                          # PING
    info, _ = p.ok([18, 3])                                                     # INFO
    for key in ("governors", "tasks", "sessions", "clients", "objects", "uploads", "version",
                "cluster", "epoch", "recovering", "secure", "insecure", "journal_bytes",
                "journal_errors", "recomputed", "ready_queue", "blocked", "watches"):
        assert key in info, key
    assert info["cluster"] == welcome[2] and info["secure"] == 0
    g = info["governors"][0]
    for key in ("id", "name", "cpus", "resources", "running", "queued", "piped", "assigned", "memory",
                "spilled", "shared", "objects", "tasks_done", "tasks_run", "joined", "data_endpoint",
                "serve_endpoint"):
        assert key in g, key
    assert abs(g["joined"] - time.time()) < 3600, "joined is Unix time in seconds"
    assert g["id"] != welcome[0], "clients and governors share one id counter"
    assert set(info["tasks"]) == {"waiting", "ready", "assigned", "running", "finished",
                                  "failed", "cancelled"}
    (session, token), _ = p.ok([10, 4])
    # a kept constant, a task whose output nobody keeps, one reading it
    p.ok([12, 5, session, [[1, 1, "", 1, "c"], [3, 0, "", -1, ""], [5, 1, "", -1, ""]],
          [[2, "noop", [1], [3], None, None, 0, 0, 0, ""],
           [4, "concat", [3], [5], None, None, 0, 0, 0, ""]]], b"abc")
    body, _ = p.ok([15, 6, session, 0, [], 10000])
    assert body == [2, 0, []]
    assert p.ok([13, 7, session, [5]]) == (None, [])                             # KEEP
    assert p.ok([14, 8, session, [5]]) == (None, [])                             # UNKEEP
    # object 3 was freed once 4 finished: KEEP and SUBMIT say 6, FETCH 12, WAIT done
    assert p.error([13, 9, session, [3]], 6)[1] == 3
    p.error([16, 10, session, 3, 1000], 12)
    body, _ = p.ok([15, 11, session, 1, [3], 1000])
    assert body == [1, 0, [[3, 1, None, None]]]
    p.error([12, 12, session, [[7, 1, "", -1, ""]],
             [[6, "noop", [3], [7], None, None, 0, 0, 0, ""]]], 6)
    # a refused SUBMIT leaves its ids free
    p.error([12, 13, session, [[9, 1, "", -1, ""]],
             [[8, "no-such-kind", [], [9], None, None, 0, 0, 0, ""]]], 9)
    p.ok([12, 14, session, [[9, 1, "", -1, ""]], [[8, "noop", [], [9], None, None, 0, 0, 0, ""]]])
    # WAIT and FETCH errors
    p.error([15, 15, session, 1, [], 1000], 4)                                  # mode 1, no ids
    p.error([15, 16, session, 1, [12345], 1000], 6)
    p.error([16, 17, session, 8, 1000], 6)                                      # a task id
    p.error([16, 18, 999999, 1, 1000], 11)                                      # unknown session
    # timeout 0 answers at once; CANCEL; the root of a cancelled task
    p.ok([12, 19, session, [[11, 0, "", -1, ""], [13, 1, "", -1, ""]],
          [[10, "sleep", [], [11], {"seconds": 30}, None, 0, 0, 0, ""],
           [12, "noop", [11], [13], None, None, 0, 0, 0, ""]]])
    p.error([15, 20, session, 1, [10], 0], 16)
    p.error([16, 21, session, 13, 0], 16)
    assert p.ok([17, 22, session, [10]]) == (None, [])                           # CANCEL
    body, _ = p.ok([15, 23, session, 1, [10, 12], 5000])
    assert body == [0, 2, [[10, 3, 10, "cancelled"], [12, 3, 10, "cancelled"]]]
    # malformed requests name the message and the field
    body = p.error([13, 24, session, "not ids"], 1)
    assert body[0].startswith("KEEP: field 'ids'"), body[0]
    body = p.error([15, 25, session, 7, [], 0], 1)
    assert body[0].startswith("WAIT: field 'mode'"), body[0]
    # RESUME on the same connection: max_id; a wrong token is denied
    body, _ = p.ok([20, 26, session, token])
    assert body == [13]
    p.error([20, 27, session, bytes(16)], 24)
    assert p.ok([11, 28, session]) == (None, [])                                 # SESSION_CLOSE
    p.send([33])                                                                # BYE: no reply
    with pytest.raises(TimeoutError):
        p.recv(300)
    p.close()


def test_delete_and_place(cluster):
    p, _ = hello(cluster)
    info, _ = p.ok([18, 2])
    gov = info["governors"][0]["id"]
    (session, _), _ = p.ok([10, 3])
    # a constant the broker holds, and a task output above inline_max that
    # stays on the governor, both kept
    p.ok([12, 4, session, [[1, 1, "", 1, "c"], [3, 1, "", -1, ""], [5, 1, "", -1, ""],
                           [7, 1, "", 2, "unused"]],
          [[2, "concat", [1], [3], None, None, 0, 0, 0, ""],
           [4, "sleep", [], [5], {"seconds": 30}, None, 0, 0, 0, ""]]], b"x" * 5000, b"y")
    p.ok([15, 5, session, 1, [3], 10000])
    assert p.ok([24, 6, session, 3, [], 0, 0, 10000])[0] == [gov]             # who has it
    # a timeout of 2^63 - 1 ms is "for ever", not an overflow (UBSan checks)
    assert p.ok([24, 60, session, 3, [], 0, 0, 2 ** 63 - 1])[0] == [gov]
    assert p.ok([15, 61, session, 1, [3], 2 ** 63 - 1])[0][0] == 1
    assert p.ok([24, 7, session, 7, [], 1, 0, 10000])[0] == []                # the broker's
    # a constant sent inside SUBMIT that a task read: held where it was sent
    assert p.ok([24, 62, session, 1, [], 0, 0, 10000])[0] == [gov]
    assert p.ok([24, 8, session, 3, [], 5, 0, 10000])[0] == [gov]             # capped
    assert p.ok([24, 9, session, 3, [gov], 0, 1, 10000])[0] == [gov]          # MOVE there
    assert p.error([24, 10, session, 3, [999999], 0, 0, 1000], 4)[1] == 999999
    assert p.error([24, 11, session, 5, [], 1, 0, 1000], 4)[1] == 5            # unfinished
    assert p.error([24, 12, session, 3, [], 0, 1, 1000], 4)[1] == 3            # MOVE, nowhere
    assert p.error([24, 13, session, 2, [], 0, 0, 1000], 6)[1] == 2            # a task id
    body = p.error([24, 14, session, 3, [], 0, 2, 1000], 1)
    assert body[0].startswith("PLACE: field 'flags'"), body[0]
    # DELETE: every id checked first; then FETCH and PLACE say deleted
    assert p.error([23, 15, session, [3, 77]], 6)[1] == 77
    assert p.error([23, 16, session, [5]], 4)[1] == 5
    assert p.ok([23, 17, session, [3, 7]]) == (None, [])
    body = p.error([16, 18, session, 3, 1000], 26)
    assert body[1] == 3 and body[2] == 3 and "deleted" in body[0]
    p.error([24, 19, session, 7, [], 0, 0, 1000], 26)
    p.error([13, 20, session, [3]], 6)                                          # KEEP: released
    p.error([23, 21, session, [3]], 6)                                          # deleted once
    body, _ = p.ok([15, 22, session, 1, [3], 1000])                            # WAIT: it was made
    assert body == [1, 0, [[3, 1, None, None]]]
    assert p.ok([11, 23, session]) == (None, [])
    p.close()


def test_a_stream_is_refused_before_and_after_it_ended(cluster):
    """Section 10, Streams: KEEP, FETCH, PLACE and DELETE of a stream are
    SQ_E_INVALID whether its writer has run yet or not (an ended stream is
    released, and still a stream)."""
    p, _ = hello(cluster)
    (session, _), _ = p.ok([10, 2])
    write = {"args": ["echo", "streamed"], "in_paths": [], "stdin": -1,
             "out_paths": [""], "stdout": 0}
    read = {"args": ["cat"], "in_paths": [""], "stdin": 0, "out_paths": [""], "stdout": 0}
    p.ok([12, 3, session, [[1, 2, "", -1, "stream"], [2, 1, "", -1, "copy"]],
          [[10, "execute", [], [1], write, None, 0, 0, 0, "writer"],
           [11, "execute", [1], [2], read, None, 0, 0, 0, "reader"]]])
    requests = [[13, 0, session, [1]], [16, 0, session, 1, 10000],
                [24, 0, session, 1, [], 0, 0, 10000], [23, 0, session, [1]]]
    for req, message in enumerate(requests, 4):
        message[1] = req
        assert p.error(message, 4)[1] == 1, message
    body, frames = p.ok([16, 8, session, 2, 10000])
    assert frames == [b"streamed\n"], (body, frames)
    for req, message in enumerate(requests, 10):
        message[1] = req
        body = p.error(message, 4)
        assert body[1] == 1 and "stream" in body[0], (message, body)
    p.close()


def test_info_lists_a_stream_from_its_writers_start_to_its_end(cluster, tmp_path):
    """INFO `streams`: listed in the very reply that first shows its writer
    running (not only once the writer's governor reported bytes, about a
    second later: a short stream never showed), and gone once it ended."""
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    p, _ = hello(cluster)
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while p.ok([18, 1])[0]["tasks"]["running"]:     # what other tests left is gone
        assert time.monotonic() < deadline, "no task running"
        time.sleep(0.02)
    (session, _), _ = p.ok([10, 2])
    write = {"args": ["sh", "-c", "echo start; cat " + gate], "in_paths": [], "stdin": -1,
             "out_paths": [""], "stdout": 0}
    read = {"args": ["cat"], "in_paths": [""], "stdin": 0, "out_paths": [""], "stdout": 0}
    p.ok([12, 3, session, [[1, 2, "", -1, "stream"], [2, 1, "", -1, "copy"]],
          [[10, "execute", [], [1], write, None, 0, 0, 0, "writer"],
           [11, "execute", [1], [2], read, None, 0, 0, 0, "reader"]]])
    req = 100
    while True:
        req += 1
        info, _ = p.ok([18, req])
        if info["tasks"]["running"] >= 1:
            break
        assert time.monotonic() < deadline, "the writer to start"
        time.sleep(0.02)
    listed = [(st["session"], st["object"]) for st in info["streams"]]
    assert (session, 1) in listed, info["streams"]
    with open(gate, "wb") as f:
        f.write(b"end\n")
    _, frames = p.ok([16, 4, session, 2, 10000])
    assert frames == [b"start\nend\n"]
    info, _ = p.ok([18, 5])
    assert (session, 1) not in [(st["session"], st["object"]) for st in info["streams"]]
    p.close()


def test_slice_beyond_the_input_fails(cluster):
    p, _ = hello(cluster)
    (session, _), _ = p.ok([10, 2])
    p.ok([12, 3, session, [[1, 0, "", 1, ""], [3, 1, "", -1, ""]],
          [[2, "slice", [1], [3], {"start": 2, "end": 10}, None, 0, 0, 0, ""]]], b"abcd")
    body, _ = p.ok([15, 4, session, 1, [2], 10000])
    assert body[1] == 1 and body[2][0][1] == 2 and "beyond" in body[2][0][3]
    body = p.error([16, 5, session, 3, 1000], 13)
    assert body[1:] == [3, 2]
    p.close()


def test_uploads_gread_gfetch_and_their_errors(cluster):
    p, _ = hello(cluster)
    (session, _), _ = p.ok([10, 2])
    key = session << 32 | 1
    where, _ = p.ok([21, 3, session, 1, 6, 0])                                  # UPLOAD
    governor, endpoint, serve_key, capability = where
    assert serve_key is None and capability is None
    g = Peer(endpoint)
    assert g.ok([72, 1, key, 0, 6, "text/plain", None], b"abc") == (None, [])    # PUT
    # every range but the last has the first one's length
    body = g.error([72, 2, key, 3, 6, "text/plain", None], 4, b"de")
    assert body[0]
    # the upload was discarded: start again, properly
    assert g.ok([72, 3, key, 0, 6, "text/plain", None], b"abc") == (None, [])
    assert g.ok([72, 4, key, 3, 6, "text/plain", None], b"def") == (None, [])
    p.ok([12, 4, session, [[1, 1, "text/plain", [governor, 6], "up"]], []])
    # a small uploaded constant is still where it was uploaded
    body, payloads = p.ok([16, 5, session, 1, 10000])
    assert body == [6, "text/plain", [governor, endpoint, None, None]] and payloads == []
    body, payloads = g.ok([71, 5, key, 0, 4, None])                             # GREAD
    assert body == [6, "text/plain"] and payloads == [b"abcd"]
    body, payloads = g.ok([71, 6, key, 4, 100, None])
    assert payloads == [b"ef"]
    body, payloads = g.ok([70, 7, key, None])                                   # GFETCH
    assert body == [6, "text/plain"] and payloads == [b"abcdef"]
    g.error([71, 8, key, 7, 1, None], 4)                                        # past the end
    g.error([71, 9, key + 1, 0, 1, None], 6)                                    # not there
    # a GREAD over 64 MiB is malformed: no reply; the next one is answered
    g.send([71, 10, key, 0, (64 << 20) + 1, None])
    g.send([71, 11, key, 0, 1, None])
    head = msgpack.unpackb(g.recv()[0])
    assert head[1] == 11
    # a claim no governor confirms: SQ_E_LOST, rooted at the constant, no task named
    p.ok([12, 12, session, [[2, 1, "", [governor, 10], "never"]], []])
    body = p.error([16, 13, session, 2, 10000], 23)
    assert body[1] == 2 and body[2] == 2 and "task" not in body[0], body
    g.close()
    p.close()


def test_log_and_logread_and_their_errors(cluster):
    """LOG asks the broker where a task's output is; LOGREAD reads it from
    that governor's serve socket. Malformed LOGs are answered with
    SQ_E_PROTOCOL, malformed LOGREADs dropped like GREADs."""
    p, _ = hello(cluster)
    (session, _), _ = p.ok([10, 2])
    config = {"args": ["sh", "-c", "echo out; echo err >&2; printf tail"]}
    p.ok([12, 3, session, [], [[1, "execute", [], [], config, None, 0, 0, 0, "echo"]]])
    assert p.ok([15, 4, session, 0, [1], 10000])[0][0] == 1
    body, _ = p.ok([25, 5, session, 1, -1, 1])                                  # LOG
    attempt, state, where = body
    assert attempt == 0 and state == "ended"
    governor, endpoint, serve_key, capability = where
    assert serve_key is None and capability is None
    g = Peer(endpoint)
    key = session << 32 | 1
    body, payloads = g.ok([73, 1, key, 0, 1, 0, 1 << 20, None])                 # LOGREAD
    assert body == [8, 8, True] and payloads == [b"out\ntail"]
    body, payloads = g.ok([73, 2, key, 0, 2, 0, 2, None])
    assert body == [2, 4, False] and payloads == [b"er"]
    body, payloads = g.ok([73, 3, key, 0, 1, 99, 10, None])                     # past the end
    assert body == [8, 8, True] and payloads == [b""]
    body = g.error([73, 4, key, 1, 1, 0, 10, None], 6)                          # another attempt
    assert "attempt 1" in body[0]
    # a stream that is not 1 or 2, a length over 4 MiB: no reply; the next is answered
    g.send([73, 5, key, 0, 3, 0, 10, None])
    g.send([73, 6, key, 0, 1, 0, (4 << 20) + 1, None])
    g.send([73, 7, key, 0, 1, 0, 3, None])
    assert msgpack.unpackb(g.recv()[0])[1] == 7
    # LOG's own errors: malformed, unknown task or session, a task not started
    assert "stream" in p.error([25, 8, session, 1, -1, 3], 1)[0]
    assert "attempt" in p.error([25, 9, session, 1, -2, 1], 1)[0]
    p.error([25, 10, session, 1, -1], 1)
    p.error([25, 11, session, 1, "x", 1], 1)
    assert p.error([25, 12, session, 77, -1, 1], 6)[1] == 77
    p.error([25, 13, session + 1000, 1, -1, 1], 11)
    p.error([25, 14, session, 1, 5, 1], 6)                                      # no such attempt
    p.ok([12, 15, session, [[3, 0, "", -1, ""]],
          [[2, "sleep", [], [3], {"seconds": 100}, {"cpus": 64}, 0, 0, 0, "big"]]])
    body, _ = p.ok([25, 16, session, 2, -1, 1])
    assert body == [0, "waiting", None]
    g.close()
    p.close()


def test_error_codes_are_the_documented_table():
    codes = [int(m) for m in re.findall(r"^\| (\d+) \| SQ_", DOC, re.M)]
    assert codes == list(range(27))
    header = open(os.path.join(os.path.dirname(_DOC), "..", "common", "squall_codes.h")).read()
    for code, name in re.findall(r"^\| (\d+) \| (SQ_[A-Z_]+) \|", DOC, re.M):
        assert re.search(r"\b%s = %s\b" % (name, code), header), name
