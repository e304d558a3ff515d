"""Conditional PUTs against the moto server: the server honours ``If-None-Match: *``, and
``ConditionalPut`` turns 412 into "lost the race" without ever guessing."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

from lakecore.store.conditional_put import ConditionalPut
from lakecore.store.file_io import FileIO
from lakecore.store.s3 import parse_s3_options
from tests.s3.server import MotoServer

# moto routes a request to its S3 backend by the credential scope; it checks no signature
_AUTH = ("AWS4-HMAC-SHA256 Credential=AK/20260101/us-east-1/s3/aws4_request, "
         "SignedHeaders=host, Signature=0")


def _raw_put(server: MotoServer, bucket: str, key: str, data: bytes,
             headers: dict[str, str]) -> int:
    """A bare HTTP PUT (no client library between the test and the server)."""
    req = urllib.request.Request(f"{server.endpoint}/{bucket}/{key}", data=data, method="PUT",
                                 headers={**headers, "Authorization": _AUTH,
                                          "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
                                          "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        e.close()
        return int(e.code)


def test_the_moto_server_honours_if_none_match_on_put(moto_server, bucket):
    star = {"If-None-Match": "*"}
    assert _raw_put(moto_server, bucket, "k", b"one", star) == 200
    assert _raw_put(moto_server, bucket, "k", b"two", star) == 412
    assert _raw_put(moto_server, bucket, "k", b"three", {}) == 200  # unconditional: overwrites
    fs = moto_server.filesystem()
    assert fs.open_input_stream(f"{bucket}/k").read() == b"three"


def _writer(server: MotoServer) -> ConditionalPut:
    opts = server.catalog_options("unused")
    return ConditionalPut(parse_s3_options(opts))


def test_create_once_then_lose(moto_server, bucket):
    cp = _writer(moto_server)
    assert cp.create(f"{bucket}/t/snapshot/snapshot-1", b"first")
    assert not cp.create(f"{bucket}/t/snapshot/snapshot-1", b"second")
    fs = moto_server.filesystem()
    assert fs.open_input_stream(f"{bucket}/t/snapshot/snapshot-1").read() == b"first"


def test_our_own_bytes_count_as_created(moto_server, bucket):
    """A PUT that landed but whose response was lost is retried by the client and meets its
    own object (412): the same bytes mean it is ours, not a lost race."""
    cp = _writer(moto_server)
    assert cp.create(f"{bucket}/tag/tag-x", b"same")
    assert cp.create(f"{bucket}/tag/tag-x", b"same")


def test_sixteen_threads_race_for_one_key_and_one_wins(moto_server, bucket):
    cp = _writer(moto_server)
    results: dict[int, bool] = {}

    def race(i: int) -> None:
        results[i] = cp.create(f"{bucket}/snapshot-7", f"writer {i}".encode())

    threads = [threading.Thread(target=race, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [i for i, won in results.items() if won]
    assert len(results) == 16 and len(winners) == 1
    data = moto_server.filesystem().open_input_stream(f"{bucket}/snapshot-7").read()
    assert data == f"writer {winners[0]}".encode()


def test_file_io_routes_only_try_create_through_conditional_writes(moto_server, bucket):
    fio, root = FileIO.for_uri(f"s3://{bucket}/wh", moto_server.catalog_options(bucket),
                               conditional_put=True)
    assert fio.conditional_writes and root == f"{bucket}/wh"
    assert fio.try_create(f"{root}/snapshot/snapshot-1", b"a")
    assert not fio.try_create(f"{root}/snapshot/snapshot-1", b"b")
    fio.overwrite_atomic(f"{root}/snapshot/LATEST", b"1")  # a hint: plain PUT, overwrites
    fio.overwrite_atomic(f"{root}/snapshot/LATEST", b"2")
    assert fio.read_text(f"{root}/snapshot/LATEST") == "2"
    names = sorted(s.path.rsplit("/", 1)[-1] for s in fio.list_status(f"{root}/snapshot"))
    assert names == ["LATEST", "snapshot-1"]  # no temporary objects left behind
