"""Every example configuration the README shows is a file in `examples/config/`, shown whole,
and a server starts from each file as written (ports, data dir, key files and the identity
provider's key set moved to this test's own with `--override`, which wins over the file), then
serves a client the way the README says.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.certificates import Certificates, make_certificates
from tests.jwt_tokens import IdentityProvider

from .conftest import MoldauServer, ServerFactory
from .test_cli_support import moldau
from .test_sasl_listeners import round_trip
from .test_tls_listeners import listener_port

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "config"
README_BLOCK = re.compile(
    r"`(examples/config/[\w.-]+\.properties)`[^`]*?\n\n```properties\n(.*?)```", re.DOTALL
)
KEY_FILES = "/etc/moldau/"


def _readme_blocks() -> dict[str, str]:
    return dict(README_BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8")))


def test_the_readme_shows_every_example_file_whole() -> None:
    shown = _readme_blocks()
    files = {f"examples/config/{p.name}": p.read_text() for p in sorted(EXAMPLES.iterdir())}
    assert sorted(shown) == sorted(files)
    for name, text in files.items():
        assert shown[name] == text, name


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir()))
def test_no_comment_follows_a_value(name: str) -> None:
    """A properties file takes `value   # comment` as the value: comments are lines of their own."""
    for line in (EXAMPLES / name).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith(("#", "!")):
            assert " #" not in line and "\t#" not in line, line


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def _start(
    start_server: ServerFactory,
    tmp_path: Path,
    certificates: Certificates,
    name: str,
    **overrides: str,
) -> MoldauServer:
    """A server from examples/config/NAME with its key files in `certificates`."""
    text = (EXAMPLES / name).read_text().replace(KEY_FILES, f"{certificates.directory}/")
    config = tmp_path / name
    config.write_text(text)
    settings = {"log.dirs": str(tmp_path / "data"), **overrides}
    arguments = ["-c", str(config)]
    for key, value in settings.items():
        arguments += ["--override", f"{key}={value}"]
    return start_server(isolated=False, arguments=arguments)


@pytest.mark.parametrize(
    ("name", "listeners", "client"),
    [
        ("tls.properties", ("SSL", "PLAINTEXT"), {
            "security.protocol": "SSL", "ssl.certificate.location": "client.crt",
            "ssl.key.location": "client.key"}),
        ("sasl.properties", ("SASL_SSL", "INTERNAL"), {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret"}),
    ],
)  # fmt: skip
def test_the_tls_and_sasl_examples_serve_a_client_as_the_readme_says(
    name: str,
    listeners: tuple[str, str],
    client: dict[str, str],
    start_server: ServerFactory,
    tmp_path: Path,
    certificates: Certificates,
) -> None:
    """The client reaches the first of `listeners` (all are moved to free ports): TLS with a
    client certificate (the file requires one), or a PLAIN user over TLS."""
    server = _start(start_server, tmp_path, certificates, name,
                    listeners=",".join(f"{n}://127.0.0.1:0" for n in listeners))  # fmt: skip
    settings: dict[str, Any] = {"ssl.ca.location": certificates.path("ca.pem")}
    for key, value in client.items():
        settings[key] = certificates.path(value) if key.endswith(".location") else value
    round_trip(f"127.0.0.1:{listener_port(server, listeners[0])}", settings)


def test_the_acl_example_refuses_a_principal_without_acls(
    start_server: ServerFactory, tmp_path: Path, certificates: Certificates
) -> None:
    server = _start(start_server, tmp_path, certificates, "acl.properties",
                    listeners="PLAINTEXT://127.0.0.1:0")  # fmt: skip
    refused = moldau("topic", "create", "denied", bootstrap=server.bootstrap_servers, expect=6)
    assert "(TOPIC_AUTHORIZATION_FAILED)" in refused.stderr, refused.stderr
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):
        admin.create_topics([NewTopic("denied", 1, 1)])["denied"].result(30)


def test_the_oauthbearer_example_serves_a_development_token(
    start_server: ServerFactory, tmp_path: Path, certificates: Certificates
) -> None:
    keys = tmp_path / "jwks.json"
    keys.write_text(IdentityProvider.with_keys("rsa-1").jwks())
    server = _start(
        start_server, tmp_path, certificates, "oauthbearer.properties",
        listeners="SASL_SSL://127.0.0.1:0,DEV://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        **{"sasl.oauthbearer.jwks.endpoint.url": keys.as_uri()},
    )  # fmt: skip
    development = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=alice scope=kafka",
    }
    round_trip(f"127.0.0.1:{listener_port(server, 'DEV')}", development)
