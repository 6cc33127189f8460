"""A key added to a task config already packed as a msgpack map (as
libsquall's sq_config_* make them): defined once, here, with the standard
library only, so that jobsubmit.py (loaded by path, before the package may
be importable) shares it with _common.py."""


def with_key(config: bytes, key: bytes, packed: bytes) -> bytes:
    """config (a msgpack map) with one more key, its value `packed`
    already; ValueError if config is not a map."""
    head = config[0] if config else None
    if head is not None and 0x80 <= head < 0x8f:
        out = bytes([head + 1]) + config[1:]
    elif head == 0x8f:
        out = b"\xde\x00\x10" + config[1:]
    elif head == 0xde:
        out = b"\xde" + (int.from_bytes(config[1:3], "big") + 1).to_bytes(2, "big") + config[3:]
    else:
        raise ValueError("the task config is not a msgpack map")
    return out + bytes([0xa0 + len(key)]) + key + packed
