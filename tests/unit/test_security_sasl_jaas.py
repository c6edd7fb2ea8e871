"""The sasl.jaas.config parser: Kafka's JaasConfig (a java.io.StreamTokenizer) and JaasContext.

Every expected value and message here is what Kafka 4.4's own classes give for the
same text (checked with a small Java program against the 4.4 jars).
"""

from __future__ import annotations

import pytest

from kpybroker.security.sasl.jaas import (
    ControlFlag,
    JaasEntry,
    config_entry_option,
    parse_jaas_config,
    parse_login_module,
)

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def only_entry(text: str) -> JaasEntry:
    (entry,) = parse_jaas_config(text)
    return entry


def test_broker_plain_listener_config() -> None:
    entry = only_entry(
        f"{PLAIN} required\n"
        '    username="admin"\n'
        '    password="admin-secret"\n'
        '    user_admin="admin-secret"\n'
        '    user_alice="alice-secret";'
    )
    assert entry.login_module == PLAIN
    assert entry.control_flag is ControlFlag.REQUIRED
    assert entry.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }


@pytest.mark.parametrize("flag", ["required", "REQUISITE", "Sufficient", "optional"])
def test_control_flags_in_any_case(flag: str) -> None:
    entry = only_entry(f"test.Module {flag} propName=propValue;")
    assert entry.control_flag is ControlFlag[flag.upper()]
    assert entry.options == {"propName": "propValue"}


def test_entry_without_options() -> None:
    assert only_entry("test.Module required;").options == {}


def test_multiple_login_modules_in_order() -> None:
    entries = parse_jaas_config(
        " ".join(f"test.Module{i} required index=Index{i} module=Module{i};" for i in range(3))
    )
    assert [(e.login_module, dict(e.options)) for e in entries] == [
        (f"test.Module{i}", {"index": f"Index{i}", "module": f"Module{i}"}) for i in range(3)
    ]


@pytest.mark.parametrize(
    ("text", "options"),
    [
        (
            'm required propName="prop value" p2="value1 = 1, value2 = 2";',
            {"propName": "prop value", "p2": "value1 = 1, value2 = 2"},
        ),
        ('m required "prop name"=propValue;', {"prop name": "propValue"}),
        ('m required option1="3";', {"option1": "3"}),
        ("m required k='single' q=\"it's\";", {"k": "single", "q": "it's"}),
        ('m required k="a\\nb\\tc\\101\\7\\400\\q";', {"k": "a\nb\tcA\x07 0q"}),
        ('m required k="\\0\\01\\012\\0123\\377\\378";', {"k": "\x00\x01\n\n3\xff\x1f8"}),
        ('m required k="é中😀" é=ü;', {"k": "é中😀", "é": "ü"}),
        ("m required k=a-b_c$d.e9 $x=_-;", {"k": "a-b_c$d.e9", "$x": "_-"}),
        ("m required k=v k=w;", {"k": "w"}),
        ('m required k="unterminated\n;', {"k": "unterminated"}),
        ('m required k="a" // the rest of the line\n;', {"k": "a"}),
        ("m required k=v /* a\n comment */ ;", {"k": "v"}),
        # Java skips the character after a line end when it looks for the closing "*/"
        ("m required /* a *\n/ k=v; */ z=q;", {"z": "q"}),
        ("m required\tk\t=\tv\r\n;", {"k": "v"}),
        ('m required "a"="";', {"a": ""}),
        # an option whose name is a number is kept by Java under a null key: nothing can read it
        ("m required 3=x;", {}),
    ],
)
def test_option_syntax(text: str, options: dict[str, str]) -> None:
    assert only_entry(text).options == options


def test_a_lone_slash_comments_out_the_rest_of_its_line() -> None:
    assert only_entry("m required k=v / comment\n;").options == {"k": "v"}
    with pytest.raises(ValueError, match=r"^JAAS config entry not terminated by semi-colon$"):
        parse_jaas_config("m required k=v /\nfoo=bar;")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified in JAAS config"),
        ("   // only a comment", "Login module not specified in JAAS config"),
        ("/* unterminated", "Login module not specified in JAAS config"),
        (
            "  required option1=value1;",
            "Invalid login module control flag 'option1' in JAAS config",
        ),
        (
            "test.loginModule option1=value1;",
            "Invalid login module control flag 'option1' in JAAS config",
        ),
        (
            "test.testInvalidControlFlag { option1=3;",
            "Login module control flag is not available in the JAAS config",
        ),
        ("x", "Login module control flag not specified in JAAS config"),
        ("loginModule required option1;", "Value not specified for key 'option1' in JAAS config"),
        ("m required option1=3;", "Value not specified for key 'option1' in JAAS config"),
        ("m required k=-v;", "Value not specified for key 'k' in JAAS config"),
        ("m required k=;", "Value not specified for key 'k' in JAAS config"),
        ("m required k", "Value not specified for key 'k' in JAAS config"),
        ("m required =v;", "Value not specified for key 'null' in JAAS config"),
        ("m required k==v;", "Value not specified for key 'k' in JAAS config"),
        (
            "test.testMissingSemicolon required option1=value1",
            "JAAS config entry not terminated by semi-colon",
        ),
        ("m required k=v; junk", "Login module control flag not specified in JAAS config"),
        ("m required k=v;;", "Login module control flag not specified in JAAS config"),
        ("m required k=v; ;;", "Login module control flag is not available in the JAAS config"),
        # Java's AppConfigurationEntry refuses these with no message at all
        ('"" required;', "Login module not specified in JAAS config"),
        ("3 required;", "Login module not specified in JAAS config"),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_jaas_config(text)
    assert str(error.value) == message


def test_sasl_jaas_config_holds_exactly_one_login_module() -> None:
    assert parse_login_module(f'{PLAIN} required user_a="b";').options == {"user_a": "b"}
    with pytest.raises(ValueError) as error:
        parse_login_module("a required; b required;")
    assert str(error.value) == "JAAS config property contains 2 login modules, should be 1 module"


@pytest.mark.parametrize(
    "module",
    [
        "com.sun.security.auth.module.JndiLoginModule",
        "com.sun.security.auth.module.LdapLoginModule",
    ],
)
def test_login_modules_kafka_refuses(module: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_login_module(f'" {module} " required;')  # compared after trim, as Kafka
    assert str(error.value) == (
        f"{module} is not allowed. The system property "
        "'org.apache.kafka.disallowed.login.modules' is deprecated. Use the "
        "org.apache.kafka.allowed.login.modules to allow this module. "
        f"e.g.,-Dorg.apache.kafka.allowed.login.modules={module}"
    )
    assert parse_jaas_config(f"{module} required;")[0].login_module == module


def test_config_entry_option_takes_the_first_entry_that_has_it() -> None:
    entries = parse_jaas_config("a required k=k1; b required k=k2 j=j2; a required j=j3;")
    assert config_entry_option(entries, "k") == "k1"
    assert config_entry_option(entries, "k", "b") == "k2"
    assert config_entry_option(entries, "j", "a") == "j3"
    assert config_entry_option(entries, "missing") is None


def test_entries_are_read_only() -> None:
    entry = only_entry("m required k=v;")
    with pytest.raises(TypeError):
        entry.options["k"] = "w"  # type: ignore[index]
