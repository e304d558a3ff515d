"""How a catalog's committers keep two of them from creating the same ``snapshot-N``.

``commit.protocol`` (a catalog option, lakecore's own) picks one of two protocols:

* ``lock`` (the default): the catalog lock (``lock.*``) serializes "check latest, create
  ``snapshot-N``". On the local filesystem the create itself is atomic (link without
  overwrite), so the lock is off there by default.
* ``conditional-put``: on an ``s3://`` warehouse, ``snapshot-N``, tags and schema files are
  created with a conditional PUT (``If-None-Match: *``; HTTP 412 when the key exists, an
  ordinary lost race), so no lock is needed and ``lock.enabled`` defaults to false.

A table records the protocol it was created with (``lakecore.store.commit_protocol``); a
writer whose catalog uses the other one is refused before it commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from lakecore.errors import OptionError

COMMIT_PROTOCOL = "commit.protocol"
S3_SCHEMES = ("s3", "s3a")


class CommitProtocol(StrEnum):
    """What makes creating ``snapshot-N`` exclusive: the catalog lock, or a conditional PUT."""

    LOCK = "lock"
    CONDITIONAL_PUT = "conditional-put"


def warehouse_scheme(warehouse: str) -> str:
    """The warehouse URI's scheme, lower case; ``""`` for a plain local path."""
    scheme, sep, _ = warehouse.partition("://")
    return scheme.lower() if sep else ""


def parse_commit_protocol(options: Mapping[str, str]) -> CommitProtocol:
    """``commit.protocol`` from the catalog options; OptionError names a bad value, and
    ``conditional-put`` on a warehouse that is not on S3."""
    text = options.get(COMMIT_PROTOCOL)
    if text is None:
        return CommitProtocol.LOCK
    try:
        protocol = CommitProtocol(text.strip().lower())
    except ValueError:
        raise OptionError(COMMIT_PROTOCOL, f"unknown commit protocol {text!r}; known: "
                          f"{', '.join(p.value for p in CommitProtocol)}") from None
    warehouse = options.get("warehouse")
    if (protocol is CommitProtocol.CONDITIONAL_PUT and warehouse is not None
            and warehouse_scheme(str(warehouse)) not in S3_SCHEMES):
        raise OptionError(COMMIT_PROTOCOL, "conditional-put needs an s3:// warehouse; on the "
                          "local filesystem snapshots are created atomically anyway")
    return protocol
