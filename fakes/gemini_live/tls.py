"""The fake Gemini Live server's TLS: one self-signed certificate for 127.0.0.1 and localhost.

The official SDK only speaks ``wss://`` (it rewrites any base URL to ``wss`` and always passes an
``ssl`` context), so the fake must serve TLS with a certificate the client can trust. This module
makes one with ``cryptography``: an EC P-256 key and a self-signed certificate whose subject
alternative names are ``IP:127.0.0.1`` and ``DNS:localhost``, valid for a year. It is written to
``<cert_dir>/cert.pem`` and ``<cert_dir>/key.pem`` and reused while it is still valid (readable,
matching its key, the two names present, more than a day left), so a CLI and its tests can share
one folder. The certificate is its own trust anchor: a client trusts ``cert.pem``
(``client_ssl_context``, or ``SSL_CERT_FILE=cert.pem`` for the SDK).

Files are written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CERT_FILE",
    "KEY_FILE",
    "CertificatePair",
    "client_ssl_context",
    "ensure_certificate",
    "server_ssl_context",
]

CERT_FILE = "cert.pem"
KEY_FILE = "key.pem"
_LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
_HOSTNAME = "localhost"
_VALID_FOR = dt.timedelta(days=365)
_MIN_LEFT = dt.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class CertificatePair:
    cert_file: Path  # PEM certificate; also the CA file a client trusts
    key_file: Path  # PEM private key (PKCS#8, unencrypted, mode 0600)


def ensure_certificate(cert_dir: Path) -> CertificatePair:
    """The certificate in ``cert_dir``, made (or remade) when missing or no longer valid."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    pair = CertificatePair(cert_dir / CERT_FILE, cert_dir / KEY_FILE)
    if not _is_valid(pair):
        cert_pem, key_pem = _make_certificate()
        _write_atomically(pair.key_file, key_pem, mode=0o600)
        _write_atomically(pair.cert_file, cert_pem, mode=0o644)
    return pair


def server_ssl_context(pair: CertificatePair) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(pair.cert_file, pair.key_file)
    return context


def client_ssl_context(ca_file: Path) -> ssl.SSLContext:
    """A client context that trusts only ``ca_file`` (hostname checks stay on)."""
    return ssl.create_default_context(cafile=str(ca_file))


def _is_valid(pair: CertificatePair) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(pair.cert_file.read_bytes())
        key = serialization.load_pem_private_key(pair.key_file.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return False
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    if cert.public_key().public_bytes(encoding, public) != key.public_key().public_bytes(
        encoding, public
    ):
        return False
    if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) < _MIN_LEFT:
        return False
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return _LOOPBACK in names.get_values_for_type(
        x509.IPAddress
    ) and _HOSTNAME in names.get_values_for_type(x509.DNSName)


def _make_certificate() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "realtime-gateway fake Gemini Live"),
            x509.NameAttribute(NameOID.COMMON_NAME, _HOSTNAME),
        ]
    )
    now = dt.datetime.now(dt.UTC)
    public_key = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALID_FOR)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(_LOOPBACK), x509.DNSName(_HOSTNAME)]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _write_atomically(path: Path, data: bytes, *, mode: int) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
