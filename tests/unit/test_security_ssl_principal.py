"""The principal of a TLS client: the subject as Java prints it, and Kafka's mapping rules.

Every expected distinguished name below is what Java 17's ``X500Principal.getName()`` printed
for the same certificate; the mapping cases are Kafka's SslPrincipalMapperTest, plus edge
cases whose results were taken from Kafka 4.4's SslPrincipalMapper.
"""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier

from kpybroker.config.core import ConfigError
from kpybroker.security.ssl_principal import (
    NoMatchingRule,
    SslPrincipalMapper,
    distinguished_name,
    principal_name,
)
from tests.helpers.certificates import CertificateAuthority

A = x509.NameAttribute
RDN = x509.RelativeDistinguishedName


def name(*attributes: x509.NameAttribute) -> x509.Name:
    """A subject from its attributes, most general first (as encoded)."""
    return x509.Name(list(attributes))


SUBJECTS = {
    "several OUs, a comma": (
        name(
            A(NameOID.COUNTRY_NAME, "US"),
            A(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
            A(NameOID.LOCALITY_NAME, "Palo Alto"),
            A(NameOID.ORGANIZATION_NAME, "Example, Inc."),
            A(NameOID.ORGANIZATIONAL_UNIT_NAME, "dev"),
            A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            A(NameOID.COMMON_NAME, "alice"),
        ),
        "CN=alice,OU=eng,OU=dev,O=Example\\, Inc.,L=Palo Alto,ST=CA,C=US",
    ),
    "special characters": (
        name(A(NameOID.COMMON_NAME, 'a+b,c;d"e\\f<g>h=i#j')),
        'CN=a\\+b\\,c\\;d\\"e\\\\f\\<g\\>h\\=i\\#j',
    ),
    "quotes and backslash": (
        name(A(NameOID.COMMON_NAME, 'O\'Brien "Jr" \\ x')),
        'CN=O\'Brien \\"Jr\\" \\\\ x',
    ),
    "leading hash": (name(A(NameOID.COMMON_NAME, "#lead")), "CN=\\#lead"),
    "edge spaces": (
        name(A(NameOID.COMMON_NAME, "  two lead and trail  ")),
        "CN=\\ \\ two lead and trail\\ \\ ",
    ),
    "only spaces": (name(A(NameOID.COMMON_NAME, "   ")), "CN=\\ \\ \\ "),
    "edge carriage returns": (name(A(NameOID.COMMON_NAME, "\rx\r")), "CN=\\\rx\\\r"),
    "escaped trailing space": (name(A(NameOID.COMMON_NAME, "x\\ ")), "CN=x\\\\\\ "),
    "control characters": (
        name(A(NameOID.COMMON_NAME, "tab\there\nnl\x7f")),
        "CN=tab\there\nnl\x7f",
    ),
    "NUL": (name(A(NameOID.COMMON_NAME, "a\x00b")), "CN=a\\00b"),
    "unescaped punctuation": (
        name(A(NameOID.COMMON_NAME, "svc_user@host*!~`'{}|^$%&")),
        "CN=svc_user@host*!~`'{}|^$%&",
    ),
    "emailAddress": (
        name(A(NameOID.COMMON_NAME, "bob"), A(NameOID.EMAIL_ADDRESS, "bob@example.com")),
        "1.2.840.113549.1.9.1=#160f626f62406578616d706c652e636f6d,CN=bob",
    ),
    "DC and UID": (
        name(
            A(NameOID.DOMAIN_COMPONENT, "com"),
            A(NameOID.DOMAIN_COMPONENT, "example"),
            A(NameOID.USER_ID, "jdoe"),
        ),
        "UID=jdoe,DC=example,DC=com",
    ),
    "non-ASCII": (
        name(
            A(NameOID.ORGANIZATION_NAME, "Bücher GmbH"),
            A(NameOID.COMMON_NAME, "Jürgen Müller 日本語"),
        ),
        "CN=Jürgen Müller 日本語,O=Bücher GmbH",
    ),
    "outside the BMP": (name(A(NameOID.COMMON_NAME, "rocket 🚀")), "CN=rocket 🚀"),
    "multi-valued RDN": (
        x509.Name(
            [
                RDN([A(NameOID.ORGANIZATION_NAME, "org")]),
                RDN([A(NameOID.COMMON_NAME, "carol"), A(NameOID.USER_ID, "c123")]),
            ]
        ),
        "CN=carol+UID=c123,O=org",
    ),
    "multi-valued RDN with a plus": (
        x509.Name(
            [
                RDN(
                    [
                        A(NameOID.ORGANIZATIONAL_UNIT_NAME, "b"),
                        A(NameOID.ORGANIZATIONAL_UNIT_NAME, "a+x"),
                    ]
                )
            ]
        ),
        "OU=b+OU=a\\+x",
    ),
    "attributes without an RFC 2253 keyword": (
        name(
            A(NameOID.SERIAL_NUMBER, "1234"),
            A(NameOID.GIVEN_NAME, "Ann"),
            A(NameOID.SURNAME, "Lee"),
            A(NameOID.TITLE, "Dr"),
            A(NameOID.STREET_ADDRESS, "1 Main St"),
            A(NameOID.POSTAL_CODE, "12345"),
            A(NameOID.BUSINESS_CATEGORY, "x"),
            A(NameOID.DN_QUALIFIER, "q"),
            A(NameOID.PSEUDONYM, "p"),
            A(NameOID.GENERATION_QUALIFIER, "III"),
            A(NameOID.INITIALS, "AL"),
            A(NameOID.JURISDICTION_COUNTRY_NAME, "US"),
            A(ObjectIdentifier("1.2.3.4.5"), "custom"),
        ),
        "1.2.3.4.5=#0c06637573746f6d,1.3.6.1.4.1.311.60.2.1.3=#13025553,2.5.4.43=#0c02414c,"
        "2.5.4.44=#0c03494949,2.5.4.65=#0c0170,2.5.4.46=#130171,2.5.4.15=#0c0178,"
        "2.5.4.17=#0c053132333435,STREET=1 Main St,2.5.4.12=#0c024472,2.5.4.4=#0c034c6565,"
        "2.5.4.42=#0c03416e6e,2.5.4.5=#130431323334",
    ),
    "PrintableString": (
        name(A(NameOID.COMMON_NAME, "printable (ok)", _type=_ASN1Type.PrintableString)),
        "CN=printable (ok)",
    ),
    "T61String": (name(A(NameOID.COMMON_NAME, "t61é", _type=_ASN1Type.T61String)), "CN=t61é"),
    # Java decodes a BMPString's bytes as UTF-8 here, so it prints them garbled.
    "BMPString": (
        name(A(NameOID.COMMON_NAME, "Ünïcödé", _type=_ASN1Type.BMPString)),
        "CN=\\00\ufffd\\00n\\00\ufffd\\00c\\00\ufffd\\00d\\00\ufffd",
    ),
    "UniversalString": (
        name(A(NameOID.COMMON_NAME, "uni", _type=_ASN1Type.UniversalString)),
        "CN=#1c0c000000750000006e00000069",
    ),
    "empty value": (
        name(A(NameOID.ORGANIZATIONAL_UNIT_NAME, ""), A(NameOID.COMMON_NAME, "e")),
        "CN=e,OU=",
    ),
    "empty subject": (x509.Name([]), ""),
}


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.mark.parametrize(("subject", "expected"), SUBJECTS.values(), ids=SUBJECTS.keys())
def test_distinguished_name_as_java_prints_it(
    ca: CertificateAuthority, subject: x509.Name, expected: str
) -> None:
    assert distinguished_name(ca.issue(subject).der) == expected


def test_principal_of_a_certificate_and_of_none(ca: CertificateAuthority) -> None:
    der = ca.client("CN=Duke,OU=ServiceUsers,O=Org,C=US").der
    assert principal_name(der, SslPrincipalMapper()) == "CN=Duke,OU=ServiceUsers,O=Org,C=US"
    assert principal_name(der, SslPrincipalMapper(None)) == "CN=Duke,OU=ServiceUsers,O=Org,C=US"
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L")
    assert principal_name(der, mapper) == "duke"
    assert principal_name(None, mapper) == "ANONYMOUS"


def test_no_matching_rule(ca: CertificateAuthority) -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L")
    with pytest.raises(NoMatchingRule) as failure:
        principal_name(ca.client("CN=x").der, mapper)
    assert str(failure.value) == (
        "No rules apply to CN=x, rules [RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L]"
    )


# --------------------------------------------------------------------------- Kafka's tests


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize(
    ("rules", "reason"),
    [
        ("default", "Invalid rule: `default`, unmatched substring: `default`"),
        ("DEFAUL", "Invalid rule: `DEFAUL`, unmatched substring: `DEFAUL`"),
        ("DEFAULT/L", "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"),
        ("DEFAULT/U", "Invalid rule: `DEFAULT/U`, unmatched substring: `/U`"),
        (
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
            "Invalid rule: `RULE:CN=(.*?)`, unmatched substring: `RULE:CN=(.*?)`",
        ),
        (
            "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "Invalid rule: `rule:^CN=(.*?)`, unmatched substring: `rule:^CN=(.*?)`",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "Invalid rule: `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U`, unmatched substring: `/U`",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "Invalid rule: `RULE:^CN=(.*?)`, unmatched substring: `RULE:^CN=(.*?)`",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "Invalid rule: `RULE:^CN=(.*?)`, unmatched substring: `RULE:^CN=(.*?)`",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
            "Invalid rule: `RULE:^CN=(.*?)`, unmatched substring: `RULE:^CN=(.*?)`",
        ),
        ("RULE:^CN=(.*)$/x\\/", "Invalid rule: `RULE:^CN=(.*)$/x\\/`, unmatched substring"),
        ("RULE:^CN=(x$/y/", "Invalid rule: `RULE:^CN=(x$/y/`, bad pattern: missing )"),
    ],
)
def test_invalid_rules(rules: str, reason: str) -> None:
    with pytest.raises(ConfigError) as failure:
        SslPrincipalMapper(rules)
    assert failure.value.key == "ssl.principal.mapping.rules"
    prefix = f"Invalid value {rules} for configuration ssl.principal.mapping.rules: "
    assert failure.value.message.startswith(prefix + reason)


def test_ssl_principal_mapper() -> None:
    mapper = SslPrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    dn = "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert mapper.name(dn) == dn


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        # empty rules are ignored
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        # escape sequences
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        # rules rule
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, "
            "RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,"
            "RULE:, DEFAULT, /DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


# --------------------------------------------------------------------------- Java's edges


@pytest.mark.parametrize(
    ("rule", "dn", "expected"),
    [
        # $12 with two groups is group 1 then "2"; $3 names no group and stays literal.
        ("RULE:^CN=(.*?),OU=(.*)$/$2$1$12$3/", "CN=Duke,OU=X", "XDukeDuke2$3"),
        ("RULE:^CN=(.*)$/$0-$01-\\$1/", "CN=abc", "CN=abc-abc-$1"),
        # Java resumes one character on after an empty match.
        ("RULE:^(a*?)$/[$1]/", "aaa", "[aaa]"),
        ("RULE:.*/x/", "abc", "xx"),
        ("RULE:^CN=(?P<n>\\w+)$/${n}!/", "CN=abc", "abc!"),
        ("RULE:^CN=([a-z]+)$/$1$1$1$1$1$1$1$1$1$1$11/", "CN=abc", "abc" * 11 + "1"),
        # \w is ASCII, as in Java.
        ("RULE:^CN=(\\w+).*$/$1/", "CN=Jürgen", "J"),
        ("RULE:^CN=(\\w+).*$/$1/U", "CN=straße", "STRA"),
        ("RULE:^CN=(.*?),OU=.*$/$1/L", "CN=ÀÉÎ,OU=x", "àéî"),
    ],
)
def test_replacements_as_java_makes_them(rule: str, dn: str, expected: str) -> None:
    assert SslPrincipalMapper(rule).name(dn) == expected


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        # Kafka escapes literal references by their first position only: "$4" here is left
        # as a reference, and Java fails on it.
        ("RULE:^CN=(.*?),OU=(.*)$/$3 and $4 and $1/", "No group 4"),
        ("RULE:^CN=(.*)$/x$/", "Illegal group reference: group index is missing"),
        ("RULE:^CN=.*$/$1/", "No group 1"),
        ("RULE:^CN=(\\w+)$/${}!/", "named capturing group has 0 length name"),
        ("RULE:^CN=(\\w+)$/${1a}!/", "capturing group name {1a} starts with digit character"),
        ("RULE:^CN=(\\w+)$/${x/", "named capturing group is missing trailing '}'"),
        ("RULE:^CN=(\\w+)$/$x/", "Illegal group reference"),
    ],
)
def test_replacements_java_refuses(rule: str, message: str) -> None:
    with pytest.raises(ValueError) as failure:
        SslPrincipalMapper(rule).name("CN=Duke,OU=X" if "OU" in rule else "CN=abc")
    assert str(failure.value) == message
