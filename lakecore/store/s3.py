"""S3 warehouses: Paimon's ``s3.*`` catalog options, parsed once, for pyarrow's S3 filesystem.

Keys (Paimon's spellings first; pypaimon 2.1 also reads the ``s3a.``, ``fs.s3.`` and
``fs.s3a.`` prefixes and the dotted forms, and so does lakecore):

- ``s3.endpoint``: ``http://host:port``, or ``host[:port]`` (then HTTPS); unset: AWS.
  Aliases: ``fs.s3.endpoint`` and the other prefixes.
- ``s3.access-key`` / ``s3.secret-key`` / ``s3.session-token``: credentials, secret (never
  logged or shown). Aliases: ``s3.access.key``, ``fs.s3.accessKeyId``, ``s3.secret.key``,
  ``fs.s3.accessKeySecret``, ``s3.security-token``, ``fs.s3.securityToken``, ...
- ``s3.region``: the region; unset: the bucket's own on AWS, else the AWS SDK's default.
- ``s3.path.style.access``: ``true`` for path-style requests (MinIO, moto, Ceph); alias
  ``s3.path-style-access``.

``s3.path.style.access`` unset: pyarrow's default, i.e. virtual-hosted requests on AWS (no
endpoint) and path-style requests to a custom endpoint. (pypaimon forces virtual-hosted
requests whenever the option is unset; Paimon's Hadoop S3A defaults to virtual-hosted too. Set
``false`` explicitly for an endpoint that needs virtual-hosted requests.)

Without credentials, pyarrow (data files) uses the AWS SDK's default chain; the conditional-write
client (``lakecore.store.conditional_put``) uses the ``AWS_*`` environment variables and the
instance metadata service, not ``~/.aws`` profiles.

Any other key under those prefixes is an ``OptionError`` naming it (a typo must not silently
fall back to other credentials or endpoints). Endpoint parameters written into the warehouse URI
(``s3://bucket/wh?endpoint_override=...``, pyarrow's own syntax) still work, but not together
with ``s3.*`` options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from lakecore.errors import OptionError
from lakecore.options.parse import parse_bool

PREFIXES = ("s3.", "s3a.", "fs.s3.", "fs.s3a.")

ENDPOINT = "s3.endpoint"
ACCESS_KEY = "s3.access-key"
SECRET_KEY = "s3.secret-key"
SESSION_TOKEN = "s3.session-token"
REGION = "s3.region"
PATH_STYLE = "s3.path.style.access"

# canonical key -> the names after a prefix (pypaimon's variants), plus pypaimon's legacy keys
_NAMES: dict[str, tuple[str, ...]] = {
    ENDPOINT: ("endpoint",),
    ACCESS_KEY: ("access-key", "access.key"),
    SECRET_KEY: ("secret-key", "secret.key"),
    SESSION_TOKEN: ("session-token", "session.token", "security-token", "security.token"),
    REGION: ("region",),
    PATH_STYLE: ("path.style.access", "path-style-access"),
}
_LEGACY = {
    "fs.s3.accessKeyId": ACCESS_KEY,
    "fs.s3.accessKeySecret": SECRET_KEY,
    "fs.s3.securityToken": SESSION_TOKEN,
}
ALIASES: dict[str, str] = {
    **{f"{p}{n}": key for key, names in _NAMES.items() for p in PREFIXES for n in names},
    **_LEGACY,
}
SECRET_KEYS = (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)


def is_s3_key(key: str) -> bool:
    """Whether a catalog option key belongs to the S3 filesystem."""
    return key.startswith(PREFIXES)


def is_secret_key(key: str) -> bool:
    """Whether a catalog option holds a credential (never log or show its value)."""
    return ALIASES.get(key) in SECRET_KEYS


@dataclass(frozen=True)
class S3Options:
    """An S3 warehouse's connection settings; ``repr`` and ``describe`` never show secrets."""

    endpoint: str | None = None  # host[:port], no scheme; None: AWS
    scheme: str = "https"
    region: str | None = None
    path_style: bool | None = None  # None: pyarrow's default (see the module docstring)
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def endpoint_url(self) -> str | None:
        return None if self.endpoint is None else f"{self.scheme}://{self.endpoint}"

    @property
    def virtual_hosted(self) -> bool:
        """Whether requests name the bucket in the host (pyarrow's rule when unset)."""
        return self.endpoint is None if self.path_style is None else not self.path_style

    def with_bucket_region(self, bucket: str) -> S3Options:
        """On AWS (no endpoint) with no region given: the bucket's own region, as pyarrow's
        ``from_uri`` finds it (one HEAD request); unchanged if it cannot be found."""
        try:
            return dataclasses.replace(self, region=pafs.resolve_s3_region(bucket))
        except (OSError, ValueError):
            return self

    def describe(self) -> str:
        """For logs and errors: endpoint, region, addressing; credentials only as set/unset."""
        creds = "credentials from options" if self.access_key else "default credentials"
        style = "virtual-hosted" if self.virtual_hosted else "path-style"
        return (f"S3 at {self.endpoint_url or 'AWS'} (region {self.region or 'default'}, "
                f"{style}, {creds})")

    def filesystem(self) -> pafs.S3FileSystem:
        """pyarrow's S3 filesystem for these settings (data files, manifests, listings)."""
        # delayed open: a file smaller than one part is sent as a single PutObject on close,
        # not as a three-request multipart upload (most metadata files are that small)
        kwargs: dict[str, object] = {"allow_delayed_open": True}
        if self.endpoint is not None:
            kwargs["endpoint_override"] = self.endpoint
            kwargs["scheme"] = self.scheme
        if self.region:
            kwargs["region"] = self.region
        if self.access_key:
            kwargs["access_key"] = self.access_key
            kwargs["secret_key"] = self.secret_key
            if self.session_token:
                kwargs["session_token"] = self.session_token
        if self.path_style is not None:
            kwargs["force_virtual_addressing"] = not self.path_style
        return pafs.S3FileSystem(**kwargs)


def _canonical_values(options: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """canonical key -> (the key as given, its value); two spellings that disagree: an error."""
    found: dict[str, tuple[str, str]] = {}
    for key, value in options.items():
        if not is_s3_key(key):
            continue
        canonical = ALIASES.get(key)
        if canonical is None:
            raise OptionError(key, "unknown S3 catalog option; known: "
                              f"{', '.join(_NAMES)} (and pypaimon's aliases of them)")
        if canonical in found and found[canonical][1] != str(value):
            other = found[canonical][0]
            raise OptionError(key, f"conflicts with {other!r} (both set {canonical}, to "
                              "different values)")
        found[canonical] = (key, str(value))
    return found


def _parse_endpoint(key: str, text: str) -> tuple[str, str]:
    """``http://host:port`` -> ("host:port", "http"); ``host:port`` -> (..., "https")."""
    text = text.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise OptionError(key, f"expected http(s)://host[:port] or host[:port], got {text!r}")
        if parts.path.strip("/") or parts.query:
            raise OptionError(key, f"an endpoint has no path or query, got {text!r}")
        return parts.netloc, parts.scheme.lower()
    if not text or "/" in text:
        raise OptionError(key, f"expected http(s)://host[:port] or host[:port], got {text!r}")
    return text, "https"


def has_s3_options(options: Mapping[str, str]) -> bool:
    return any(is_s3_key(k) for k in options)


def parse_s3_options(options: Mapping[str, str]) -> S3Options:
    """The ``s3.*`` catalog options as one value; OptionError names a bad key or value."""
    found = _canonical_values(options)

    def get(canonical: str) -> tuple[str, str] | None:
        return found.get(canonical)

    endpoint, scheme = None, "https"
    if (e := get(ENDPOINT)) is not None:
        endpoint, scheme = _parse_endpoint(*e)
    path_style = None
    if (p := get(PATH_STYLE)) is not None:
        try:
            path_style = parse_bool(p[1])
        except ValueError as err:
            raise OptionError(p[0], str(err)) from err
    access, secret = get(ACCESS_KEY), get(SECRET_KEY)
    if (access is None) != (secret is None):
        given, missing = (access, SECRET_KEY) if access is not None else (secret, ACCESS_KEY)
        assert given is not None
        raise OptionError(given[0], f"needs {missing} as well (both or neither)")
    token = get(SESSION_TOKEN)
    if token is not None and access is None:
        raise OptionError(token[0], f"a session token needs {ACCESS_KEY} and {SECRET_KEY}")
    region = get(REGION)
    return S3Options(
        endpoint=endpoint,
        scheme=scheme,
        region=region[1].strip() or None if region is not None else None,
        path_style=path_style,
        access_key=access[1] if access else None,
        secret_key=secret[1] if secret else None,
        session_token=token[1] if token else None,
    )


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` (or ``s3a://``) -> ("bucket/a/b" without trailing slash, the query
    and user info: pyarrow's own URI parameters, empty when there are none)."""
    parts = urlsplit(uri)
    if not parts.netloc:
        raise OptionError("warehouse", f"an S3 warehouse names a bucket: s3://bucket/path, "
                          f"got {uri!r}")
    host = parts.netloc.rsplit("@", 1)[-1]
    path = f"{host}{parts.path}".rstrip("/")
    extra = parts.query + ("@" if "@" in parts.netloc else "")
    return path, extra
