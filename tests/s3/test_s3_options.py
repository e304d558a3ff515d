"""Paimon's ``s3.*`` catalog options and ``commit.protocol``: parsing and refusals (no server)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from lakecore import CatalogFactory
from lakecore.errors import OptionError
from lakecore.lock import NoopLock, parse_lock_options
from lakecore.lock.protocol import CommitProtocol, parse_commit_protocol
from lakecore.store.file_io import FileIO
from lakecore.store.s3 import S3Options, is_secret_key, parse_s3_options

SECRET = "s3cr3t-value-never-shown"


def test_paimon_keys_map_onto_one_value():
    o = parse_s3_options({"s3.endpoint": "http://127.0.0.1:9000", "s3.access-key": "AK",
                          "s3.secret-key": SECRET, "s3.region": "eu-west-1",
                          "s3.path.style.access": "true", "other": "ignored"})
    assert (o.endpoint, o.scheme, o.region, o.path_style) == ("127.0.0.1:9000", "http",
                                                              "eu-west-1", True)
    assert (o.access_key, o.secret_key) == ("AK", SECRET)
    assert not o.virtual_hosted and o.endpoint_url == "http://127.0.0.1:9000"


@pytest.mark.parametrize("options", [
    {"fs.s3.endpoint": "minio:9000", "fs.s3.accessKeyId": "AK",
     "fs.s3.accessKeySecret": SECRET, "fs.s3.region": "r1", "s3.path-style-access": "true"},
    {"s3a.endpoint": "minio:9000", "s3.access.key": "AK", "fs.s3a.secret.key": SECRET,
     "s3a.region": "r1", "fs.s3a.path.style.access": "true"},
])
def test_pypaimon_aliases_are_read_too(options):
    o = parse_s3_options(options)
    assert (o.endpoint, o.scheme, o.region, o.path_style) == ("minio:9000", "https", "r1", True)
    assert (o.access_key, o.secret_key) == ("AK", SECRET)


def test_addressing_follows_pyarrow_when_unset_and_the_option_when_set():
    assert S3Options().virtual_hosted  # AWS
    assert not S3Options(endpoint="minio:9000").virtual_hosted
    assert S3Options(endpoint="oss.example.com", path_style=False).virtual_hosted


@pytest.mark.parametrize("options, key, match", [
    ({"s3.endpiont": "x"}, "s3.endpiont", "unknown S3 catalog option"),
    ({"fs.s3a.connection.maximum": "10"}, "fs.s3a.connection.maximum", "unknown S3"),
    ({"s3.endpoint": "ftp://h:1"}, "s3.endpoint", "expected http"),
    ({"s3.endpoint": "http://h:1/bucket"}, "s3.endpoint", "no path"),
    ({"s3.endpoint": ""}, "s3.endpoint", "expected http"),
    ({"s3.path.style.access": "maybe"}, "s3.path.style.access", "true. or .false"),
    ({"s3.access-key": "AK"}, "s3.access-key", "needs s3.secret-key"),
    ({"s3.secret-key": SECRET}, "s3.secret-key", "needs s3.access-key"),
    ({"s3.session-token": "t"}, "s3.session-token", "needs s3.access-key"),
    ({"s3.region": "a", "fs.s3.region": "b"}, "fs.s3.region", "conflicts with 's3.region'"),
])
def test_bad_s3_options_name_the_key(options, key, match):
    with pytest.raises(OptionError, match=match) as err:
        parse_s3_options(options)
    assert err.value.key == key
    assert SECRET not in str(err.value)


def test_secrets_never_appear_in_repr_or_describe():
    o = parse_s3_options({"s3.access-key": "AKIA-ACCESS", "s3.secret-key": SECRET,
                          "s3.session-token": "TOKEN-xyz", "s3.endpoint": "h:1"})
    for text in (repr(o), o.describe()):
        assert SECRET not in text and "AKIA-ACCESS" not in text and "TOKEN-xyz" not in text
    assert all(is_secret_key(k) for k in ("s3.secret-key", "fs.s3.accessKeySecret",
                                          "s3.access-key", "fs.s3a.session.token"))
    assert not is_secret_key("s3.endpoint")


def test_commit_protocol_values_and_where_it_applies():
    assert parse_commit_protocol({}) is CommitProtocol.LOCK
    assert parse_commit_protocol({"commit.protocol": "Conditional-Put",
                                  "warehouse": "s3://b/wh"}) is CommitProtocol.CONDITIONAL_PUT
    with pytest.raises(OptionError, match="unknown commit protocol 'etag'") as err:
        parse_commit_protocol({"commit.protocol": "etag"})
    assert err.value.key == "commit.protocol"
    with pytest.raises(OptionError, match="needs an s3:// warehouse"):
        CatalogFactory.create({"warehouse": "/tmp/wh", "commit.protocol": "conditional-put"})


def test_the_lock_is_off_by_default_under_conditional_writes():
    s3 = {"warehouse": "s3://b/wh"}
    with pytest.raises(OptionError, match="unless commit.protocol=conditional-put"):
        parse_lock_options(s3)  # the lock protocol: on by default, and it needs lock.uri
    assert not parse_lock_options({**s3, "commit.protocol": "conditional-put"}).enabled
    # asked for explicitly, it is taken (redundant, harmless)
    assert parse_lock_options({**s3, "commit.protocol": "conditional-put",
                               "lock.enabled": "true", "lock.uri": "sqlite:////tmp/x.db"}
                              ).enabled


def test_an_s3_warehouse_is_pyarrow_s3_built_from_the_options():
    fio, path = FileIO.for_uri("s3a://bucket/some/wh/", {
        "s3.endpoint": "http://127.0.0.1:1", "s3.access-key": "AK", "s3.secret-key": SECRET,
        "s3.region": "us-east-1", "s3.path.style.access": "true"})
    assert path == "bucket/some/wh"
    assert isinstance(fio.fs, pafs.S3FileSystem) and fio.is_object_store
    assert fio.fs.region == "us-east-1" and not fio.conditional_writes
    assert SECRET not in repr(fio.fs)


def test_uri_parameters_and_s3_options_do_not_mix():
    uri = "s3://bucket/wh?endpoint_override=127.0.0.1:1&scheme=http&region=us-east-1"
    fio, path = FileIO.for_uri(uri)  # pyarrow's own syntax still works alone
    assert path == "bucket/wh" and isinstance(fio.fs, pafs.S3FileSystem)
    with pytest.raises(OptionError, match="not as parameters in the warehouse URI"):
        FileIO.for_uri(uri, {"s3.region": "us-east-1"})
    with pytest.raises(OptionError, match="not as parameters in the warehouse URI"):
        FileIO.for_uri(uri, conditional_put=True)


def test_a_local_catalog_validates_s3_keys_but_needs_no_lock(tmp_path):
    with pytest.raises(OptionError, match="unknown S3 catalog option"):
        CatalogFactory.create({"warehouse": str(tmp_path), "s3.acess-key": "x"})
    assert isinstance(CatalogFactory.create({"warehouse": str(tmp_path)}).lock, NoopLock)
