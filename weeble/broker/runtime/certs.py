"""Per-run TLS material for the admin servers: a throwaway CA, a server and a client certificate.

Generated fresh for every run (never committed, never reused), so a leaked key is worth one
run. The server certificate names every host the brokers' management addresses use (IPs and
DNS names), so clients verify it normally.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from weeble.broker.runtime.private import private_dir, write_private


@dataclass(frozen=True)
class RunCerts:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def generate_run_certs(directory: Path | str, hosts: list[str], *, days: int = 7,
                       run_id: str = "weeble") -> RunCerts:
    """Write ca.crt, server.crt/key and client.crt/key (PEM) into `directory`."""
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

    def leaf(name: str, usage: x509.ObjectIdentifier,
             sans: list[x509.GeneralName]) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
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
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    server_cert, server_key = leaf(f"{run_id} brokers", ExtendedKeyUsageOID.SERVER_AUTH,
                                   [_san(h) for h in dict.fromkeys(hosts)])
    client_cert, client_key = leaf(f"{run_id} orchestrator", ExtendedKeyUsageOID.CLIENT_AUTH, [])

    out = RunCerts(d / "ca.crt", d / "server.crt", d / "server.key", d / "client.crt",
                   d / "client.key")
    out.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    out.server_cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    out.client_cert.write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    for path, key in ((out.server_key, server_key), (out.client_key, client_key)):
        write_private(path, key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return out


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
