"""CurveZMQ keys for a squall cluster (docs/security.md)."""
from __future__ import annotations

import ctypes
import os
from typing import Optional

from . import _lib as L
from .errors import SquallError

__all__ = ["keygen", "local_keys"]


def keygen(name: str, dir: str = ".", role: str = "client",
           tenant: Optional[str] = None) -> str:
    """Writes DIR/NAME.key (secret, mode 0600) and DIR/NAME.pub in CZMQ's
    certificate format; role "client", "governor", "admin" or "broker"; a
    client without a tenant is its own tenant, NAME. Returns the .key path."""
    err = ctypes.create_string_buffer(600)
    if L.sq_keygen(name.encode(), os.fsencode(dir), role.encode(),
                   tenant.encode() if tenant else None, err, len(err)):
        raise SquallError("keygen %s: %s" % (name, err.value.decode("utf-8", "replace")))
    return os.path.join(dir, name + ".key")


def local_keys(dir: str, governors: int = 0) -> dict:
    """The keys of a cluster on this machine, made in DIR (which must be
    private): the broker's pair, an authorized/ directory with a governor
    key, `governors` more governor keys (keys["governor_keys"], one per
    governor: the broker refuses a governor key already connected) and a
    client key, and a dashboard token. Returns their paths."""
    os.makedirs(dir, mode=0o700, exist_ok=True)
    authorized = os.path.join(dir, "authorized")
    os.makedirs(authorized, mode=0o700, exist_ok=True)
    keys = {
        "broker_key": keygen("broker", dir, "broker"),
        "governor_key": keygen("governor", authorized, "governor"),
        "client_key": keygen("client", authorized, "admin"),
        "authorized": authorized,
        "governor_keys": [keygen("governor-%d" % (i + 1), authorized, "governor")
                          for i in range(governors)],
    }
    keys["broker_pub"] = keys["broker_key"][:-4] + ".pub"
    token = os.path.join(dir, "http-token")
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    keys["http_token"] = token
    return keys
