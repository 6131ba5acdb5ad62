"""Per-run TLS material: a throwaway CA, one certificate per broker that names it, and a
client certificate.

Generated fresh for every run (never committed, never reused), so a leaked key is worth one
run. A broker's certificate has the broker id as its common name and as a DNS name, beside
the hosts it is reached at (its admin, listen and link addresses), and it is the only one that
broker presents: on its admin port, its listen port and its links. So a broker's key answers
for that broker only: an admin client that asks for broker b's name (AdminAccess.client, the
orchestrator's one way to a broker's admin) refuses any other broker's certificate, and so do
both ends of a TLS link (the dialer checks that the acceptor's certificate names the neighbour
it dialled, the acceptor that the dialer's certificate names the broker its hello claims to
be, links.py). The probe of issue 24 found one certificate (with every broker's admin host)
on every admin port: any broker's key could answer as any other's admin. The client
certificate (common name `<run> clients`) is what the run's clients and its orchestrator
present; it names no broker, so it cannot open a link.

The CA's key stays in the run's `tls/` directory (0600, like every key there) for the run's
life, so a broker added at run time gets a certificate naming it (`issue_broker_cert`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from weeble.runtime.private import private_dir, write_private


@dataclass(frozen=True)
class RunCerts:
    ca: Path
    client_cert: Path
    client_key: Path
    brokers: dict[str, tuple[Path, Path]] = field(default_factory=dict)  # id -> (cert, key)


def generate_run_certs(directory: Path | str, brokers: dict[str, list[str]], *, days: int = 7,
                       run_id: str = "weeble") -> RunCerts:
    """Write ca.crt and client.crt/key (PEM) into `directory`, and for each of `brokers` (id ->
    the hosts it is reached at: admin, listen) broker-<id>.crt/key naming it."""
    d = private_dir(directory)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{run_id} run CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    leaf = _signer(ca_name, ca_key, now, days)

    client_cert, client_key = leaf(f"{run_id} clients", ExtendedKeyUsageOID.CLIENT_AUTH, [])

    out = RunCerts(d / "ca.crt", d / "client.crt", d / "client.key")
    keys = [(out.client_key, client_key)]
    for broker, broker_hosts in brokers.items():
        out.brokers[broker] = _broker_cert(d, broker, broker_hosts, leaf)
    out.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    keys.append((d / "ca.key", ca_key))
    out.client_cert.write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    for path, key in keys:
        write_private(path, key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return out


def _signer(ca_name: x509.Name, ca_key: ec.EllipticCurvePrivateKey, now: dt.datetime,
            days: int) -> Any:
    """leaf(name, usage(s), sans) -> (certificate, key): a certificate the CA signs."""

    def leaf(name: str, usage: x509.ObjectIdentifier | list[x509.ObjectIdentifier],
             sans: list[x509.GeneralName]) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        usages = usage if isinstance(usage, list) else [usage]
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    return leaf


def _broker_cert(d: Path, broker: str, hosts: list[str], leaf: Any) -> tuple[Path, Path]:
    """broker-<id>.crt/key in `d`: the broker id as common name and DNS name, its hosts."""
    if not _BROKER_ID.match(broker):
        raise ValueError(f"broker id {broker!r}: not usable as a certificate DNS name")
    cert, key = leaf(broker, [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
                     [x509.DNSName(broker), *(_san(h) for h in dict.fromkeys(hosts))])
    paths = (d / f"broker-{broker}.crt", d / f"broker-{broker}.key")
    paths[0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(paths[1], key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return paths


def issue_broker_cert(directory: Path | str, broker: str, hosts: list[str], *,
                      days: int = 7) -> tuple[Path, Path]:
    """A certificate for a broker that joins a running run (a leaf added at run time), signed
    by the run's CA in `directory` (its ca.crt and ca.key): the same kind as the planned
    brokers' (`generate_run_certs`). Returns (cert, key)."""
    d = Path(directory)
    try:
        ca_cert = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
        ca_key = serialization.load_pem_private_key((d / "ca.key").read_bytes(), password=None)
    except (OSError, ValueError) as e:
        raise ValueError(f"{d}: the run's CA cannot sign a new certificate: {e}") from None
    leaf = _signer(ca_cert.subject, ca_key, dt.datetime.now(dt.UTC), days)  # type: ignore[arg-type]
    return _broker_cert(d, broker, hosts, leaf)


_BROKER_ID = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
