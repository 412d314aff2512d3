"""The local cluster's certificates: a certificate authority of its own and one server certificate per node.

Made once under ``<data dir>/tls`` (the directory and every file readable by their owner only) with the
``cryptography`` package, and kept across restarts: the nodes serve their certificates to clients and to
each other on the cluster routes, and every claimlog client trusts the authority (CLAIMLOG_NATS_TLS_CA).
A certificate that has expired, or is about to, is made anew at the next start.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

TLS_DIR = "tls"
CA_FILE = "ca.pem"
CA_KEY_FILE = "ca-key.pem"
CA_YEARS = 10
SERVER_DAYS = 825
RENEW_BEFORE = datetime.timedelta(days=30)
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_ADDRESSES = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class ServerCertificate:
    """A node's certificate and key files, and the authority's certificate that vouches for them."""

    cert: Path
    key: Path
    ca: Path


def local_ca_file(data_dir: Path) -> Path:
    """Where the data directory's authority certificate is (it may not exist yet)."""
    return data_dir / TLS_DIR / CA_FILE


def server_certificates(data_dir: Path, names: list[str]) -> dict[str, ServerCertificate]:
    """Each named node's certificate under ``<data dir>/tls``, made (with the authority) where missing or expiring."""
    return issue_certificates(data_dir / TLS_DIR, names)


def issue_certificates(home: Path, names: list[str]) -> dict[str, ServerCertificate]:
    """An authority in ``home`` (made once) and a certificate of it for each server ``name`` (a host name the
    clients and the other servers reach it by; loopback too), made where missing or expiring; all owner-only."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)
    ca_cert, ca_key = _authority(home)
    return {name: _server(home, name, ca_cert, ca_key) for name in names}


def _authority(home: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = home / CA_FILE, home / CA_KEY_FILE
    if cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if _fresh(cert) and isinstance(key, ec.EllipticCurvePrivateKey):
            return cert, key
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "claimlog"),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"claimlog CA {home.resolve()}"[:64])])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365 * CA_YEARS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_private(key_path, _key_pem(key))
    _write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    for old in home.glob("*.crt"):  # the servers' certificates of a replaced authority are no longer trusted
        old.unlink()
    return cert, key


def _server(home: Path, name: str, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey) -> ServerCertificate:
    found = ServerCertificate(home / f"{name}.crt", home / f"{name}.key", home / CA_FILE)
    if found.cert.exists() and found.key.exists():
        cert = x509.load_pem_x509_certificate(found.cert.read_bytes())
        if _fresh(cert) and cert.issuer == ca_cert.subject:
            return found
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    alt_names = [x509.DNSName(name), *(x509.DNSName(n) for n in LOOPBACK_NAMES),
                 *(x509.IPAddress(ipaddress.ip_address(a)) for a in LOOPBACK_ADDRESSES)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "claimlog"),
                                 x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SERVER_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        # A node is a server to clients and, on the routes, a client of the other nodes.
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(found.key, _key_pem(key))
    _write_private(found.cert, cert.public_bytes(serialization.Encoding.PEM))
    return found


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _fresh(cert: x509.Certificate) -> bool:
    return cert.not_valid_after_utc - RENEW_BEFORE > _now()


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by its owner only, replacing the file whole (a reader never sees half of it)."""
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(staged, path)
