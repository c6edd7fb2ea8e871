#!/usr/bin/env python3
"""Generate kpybroker/protocol/messages/*.py from the schemas in protocol/*.schema.

The schema language is described in protocol/README.md. For every message
version the generator writes straight-line decode and encode functions (shared
between versions whose code is identical), so that decoding a request costs no
table look-ups at run time.

Each schema makes two modules: ``messages/<name>.py`` with its classes, and
``messages/codecs/<name>.py`` with their encoders and decoders, three quarters of the
code. The classes import the codecs at their first encode or decode, so that starting a
broker does not load (or, without cached bytecode, compile) the codecs of every API.

    python scripts/gen_protocol.py           # rewrite the generated modules
    python scripts/gen_protocol.py --check   # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "protocol"
OUT_DIR = ROOT / "kpybroker" / "protocol" / "messages"
CODEC_DIR = OUT_DIR / "codecs"
CODEC_PACKAGE = "kpybroker.protocol.messages.codecs"
MAX_VERSION = 32767

FIXED = {
    "bool": ("BOOL", "False", 1),
    "int8": ("I8", "0", 1),
    "int16": ("I16", "0", 2),
    "int32": ("I32", "0", 4),
    "int64": ("I64", "0", 8),
    "uint16": ("U16", "0", 2),
    "float64": ("F64", "0.0", 8),
}
# struct format character of each fixed-width type, for runs packed with one Struct.
FORMAT = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "float64": "d",
}
VARIABLE = {"string", "bytes", "records", "uuid"}
PRIMITIVES = set(FIXED) | VARIABLE


class SchemaError(Exception):
    pass


@dataclass(frozen=True)
class Versions:
    low: int
    high: int

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    @classmethod
    def parse(cls, text: str) -> Versions | None:
        if text == "none":
            return None
        if m := re.fullmatch(r"(\d+)\+", text):
            return cls(int(m[1]), MAX_VERSION)
        if m := re.fullmatch(r"(\d+)-(\d+)", text):
            return cls(int(m[1]), int(m[2]))
        if re.fullmatch(r"\d+", text):
            return cls(int(text), int(text))
        raise SchemaError(f"bad version range {text!r}")


@dataclass
class Field:
    name: str
    type: str  # primitive or struct name
    array: bool
    versions: Versions
    nullable: Versions | None
    tag: int | None
    default: str | None
    line: int
    children: list[Field] = field(default_factory=list)
    cacheable: bool = False
    """Values may be given already encoded (``Encoded``), to be copied as they are."""

    @property
    def is_struct(self) -> bool:
        return self.type not in PRIMITIVES

    def present(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return self.nullable is not None and version in self.nullable


@dataclass
class Message:
    class_name: str
    versions: Versions
    flexible: Versions | None
    fields: list[Field]


@dataclass
class Schema:
    name: str
    module: str
    api_key: int | None
    versions: Versions
    flexible: Versions | None
    messages: list[Message]
    structs: dict[str, list[Field]]


# -- parsing ---------------------------------------------------------------

FIELD_RE = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)\s+(?P<type>\S+)(?P<rest>.*)$")


def parse_header(tokens: list[str], line: int) -> dict[str, str]:
    attrs = {}
    for tok in tokens:
        if "=" not in tok:
            raise SchemaError(f"line {line}: expected key=value, got {tok!r}")
        k, v = tok.split("=", 1)
        attrs[k] = v
    return attrs


RESERVED = {"api", "message", "struct", "request", "response"}


def parse_field(text: str, line: int, message_versions: Versions) -> Field:
    m = FIELD_RE.match(text)
    if not m:
        raise SchemaError(f"line {line}: cannot parse field {text!r}")
    if m["name"] in RESERVED:
        raise SchemaError(f"line {line}: {m['name']!r} must start a line, not be a field")
    type_text = m["type"]
    array = type_text.startswith("[")
    if array:
        if not type_text.endswith("]"):
            raise SchemaError(f"line {line}: bad array type {type_text!r}")
        type_text = type_text[1:-1]
    if type_text not in PRIMITIVES and not re.fullmatch(r"[A-Z][A-Za-z0-9]*", type_text):
        raise SchemaError(f"line {line}: unknown type {type_text!r}")
    versions, nullable, tag, default = message_versions, None, None, None
    cacheable = False
    rest = m["rest"].strip()
    tokens = re.findall(r'default="(?:[^"\\]|\\.)*"|\S+', rest)
    for tok in tokens:
        if tok.startswith("v") and re.fullmatch(r"v[\d+\-]+", tok):
            versions = Versions.parse(tok[1:])
        elif tok == "nullable":
            nullable = Versions(0, MAX_VERSION)
        elif tok.startswith("nullable="):
            nullable = Versions.parse(tok.split("=", 1)[1])
        elif tok.startswith("tag="):
            tag = int(tok.split("=", 1)[1])
        elif tok.startswith("default="):
            default = tok.split("=", 1)[1]
        elif tok == "cacheable":
            cacheable = True
        else:
            raise SchemaError(f"line {line}: unknown attribute {tok!r}")
    # Clamp to the message's versions: a field never outlives its message.
    low = max(versions.low, message_versions.low)
    high = min(versions.high, message_versions.high)
    if cacheable and (type_text in PRIMITIVES or tag is not None):
        raise SchemaError(f"line {line}: only untagged struct fields can be cacheable")
    field_ = Field(m["name"], type_text, array, Versions(low, high), nullable, tag, default, line)
    field_.cacheable = cacheable
    return field_


def parse_schema(path: Path) -> Schema:
    lines = path.read_text().splitlines()
    header: dict[str, str] | None = None
    kind = ""
    name = ""
    structs: dict[str, list[Field]] = {}
    sections: dict[str, list[Field]] = {}
    stack: list[tuple[int, list[Field]]] = []
    versions = Versions(0, 0)

    def close_struct(f: Field) -> None:
        if f.is_struct and f.children:
            existing = structs.get(f.type)
            if existing is not None and existing is not f.children:
                raise SchemaError(f"{path.name}:{f.line}: struct {f.type} declared twice")
            structs[f.type] = f.children

    for lineno, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].rstrip()
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip(" "))
        text = text.strip()
        if indent == 0:
            tokens = text.split()
            if tokens[0] in ("api", "message"):
                kind, name = tokens[0], tokens[1]
                header = parse_header(tokens[2:], lineno)
                versions = Versions.parse(header["versions"]) or Versions(0, 0)
                if kind == "message":
                    sections[""] = []
                    stack = [(0, sections[""])]
            elif tokens[0] in ("request", "response"):
                sections[tokens[0]] = []
                stack = [(0, sections[tokens[0]])]
            elif tokens[0] == "struct":
                structs[tokens[1]] = []
                stack = [(0, structs[tokens[1]])]
            else:
                raise SchemaError(f"{path.name}:{lineno}: unexpected {text!r}")
            continue
        if indent % 2:
            raise SchemaError(f"{path.name}:{lineno}: indent by two spaces")
        level = indent // 2
        while stack and stack[-1][0] >= level:
            stack.pop()
        if not stack or stack[-1][0] != level - 1:
            raise SchemaError(f"{path.name}:{lineno}: unexpected indentation")
        f = parse_field(text, lineno, versions)
        stack[-1][1].append(f)
        stack.append((level, f.children))

    if header is None:
        raise SchemaError(f"{path.name}: no api or message line")

    def register(fields: list[Field]) -> None:
        for f in fields:
            close_struct(f)
            register(f.children)

    for fields in list(sections.values()) + list(structs.values()):
        register(fields)

    def resolve(fields: list[Field]) -> None:
        for f in fields:
            if f.is_struct:
                if not f.children:
                    if f.type not in structs:
                        raise SchemaError(f"{path.name}:{f.line}: unknown struct {f.type}")
                    f.children = structs[f.type]
                resolve(f.children)

    for fields in sections.values():
        resolve(fields)
    flexible = Versions.parse(header.get("flexible", "none"))
    module = path.stem
    if kind == "api":
        if set(sections) != {"request", "response"}:
            raise SchemaError(f"{path.name}: an api needs request and response sections")
        messages = [
            Message(name + "Request", versions, flexible, sections["request"]),
            Message(name + "Response", versions, flexible, sections["response"]),
        ]
        api_key = int(header["key"])
    else:
        messages = [Message(name, versions, flexible, sections[""])]
        api_key = None
    return Schema(name, module, api_key, versions, flexible, messages, structs)


# -- code generation -------------------------------------------------------


def python_default(f: Field, version: int | None = None) -> str:
    """The Python expression for a field's default value."""
    d = f.default
    if f.array:
        return "None" if d == "null" else "[]"
    if f.is_struct:
        return "None" if d == "null" else f"{f.type}()"
    if d == "null":
        return "None"
    if f.type == "bool":
        return "True" if d == "true" else "False"
    if f.type in FIXED:
        if d is None:
            return FIXED[f.type][1]
        return str(int(d, 0)) if f.type != "float64" else repr(float(d))
    if f.type == "string":
        return "''" if d is None else repr(d.strip('"').encode().decode("unicode_escape"))
    if f.type == "uuid":
        return "ZERO_UUID"
    return "b''" if f.type == "bytes" else "None"  # records default to null


class Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def indent(self) -> None:
        self.depth += 1

    def dedent(self) -> None:
        self.depth -= 1


def is_plain_fixed(f: Field) -> bool:
    """A fixed-width scalar outside the tag section."""
    return f.tag is None and not f.array and f.type in FIXED


def fixed_runs(fields: list[Field]) -> list[list[Field]]:
    """``fields`` in order, consecutive plain fixed-width ones grouped: a group of two or
    more is read or written with one precompiled ``Struct``."""
    groups: list[list[Field]] = []
    for f in fields:
        if groups and is_plain_fixed(f) and all(is_plain_fixed(g) for g in groups[-1]):
            groups[-1].append(f)
        else:
            groups.append([f])
    return groups


class Generator:
    """Generates one module: classes, then per-version decoders and encoders."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.functions: dict[str, str] = {}  # body text -> function name
        self.chunks: list[str] = []
        self.counter = 0
        self.var = 0
        self.structs: dict[str, str] = {}  # name -> format of the Structs of fixed-width runs
        self.defaults: dict[str, str] = {}  # name -> struct class of default instances
        # cacheable struct -> message version -> its encoder function
        self.cacheable: dict[str, dict[int, str]] = {}

    def run_struct(self, run: list[Field]) -> str:
        """The module-level ``Struct`` for a run of fixed-width fields."""
        fmt = "".join(FORMAT[f.type] for f in run)
        name = "_S_" + fmt.replace("?", "o")
        self.structs[name] = fmt
        return name

    def default_instance(self, f: Field) -> str:
        """An expression equal to ``f``'s default, built once per module for structs (the
        encoders compare tagged fields with their defaults on every call)."""
        if not f.is_struct or f.array or f.default == "null":
            return python_default(f)
        name = f"_DEFAULT_{f.type}"
        self.defaults[name] = f.type
        return name

    def fresh(self, prefix: str) -> str:
        self.var += 1
        return f"{prefix}{self.var}"

    # classes ------------------------------------------------------------

    def class_source(self, name: str, fields: list[Field], extra: list[str]) -> str:
        e = Emitter()
        e(f"class {name}:")
        e.indent()
        slots = ", ".join(repr(f.name) for f in fields)
        e(f"__slots__ = ({slots}{',' if len(fields) == 1 else ''})")
        for line in extra:
            e(line)
        if fields:
            params = ", ".join(f"{f.name}=_MISSING" for f in fields)
            e(f"def __init__(self, {params}):")
            e.indent()
            for f in fields:
                e(f"self.{f.name} = {python_default(f)} if {f.name} is _MISSING else {f.name}")
            e.dedent()
        e("def __eq__(self, other):")
        e.indent()
        comparisons = "".join(f" and self.{f.name} == other.{f.name}" for f in fields)
        e(f"return type(other) is type(self){comparisons}")
        e.dedent()
        e("def __repr__(self):")
        e.indent()
        e("args = ', '.join(f'{s}={getattr(self, s)!r}' for s in self.__slots__)")
        e("return f'{type(self).__name__}({args})'")
        e.dedent()
        return "\n".join(e.lines)

    # decoding -----------------------------------------------------------

    def decode_value(self, e: Emitter, f: Field, target: str, flexible: bool, v: int) -> None:
        """Emit code reading one (non-array) value of ``f``'s type into ``target``."""
        self._decode_value(e, f, target, flexible, v)
        if f.type in ("string", "bytes", "records") and (f.array or not f.nullable_in(v)):
            e(f"if {target} is None:")
            e.indent()
            e(f"raise DecodeError('null {f.name} is not allowed')")
            e.dedent()

    def _decode_value(self, e: Emitter, f: Field, target: str, flexible: bool, v: int) -> None:
        t = f.type
        if t in FIXED:
            st = FIXED[t][0]
            e(f"({target},) = {st}.unpack_from(buf, pos)")
            e(f"pos += {FIXED[t][2]}")
        elif t == "string":
            fn = "read_compact_string" if flexible else "read_string"
            e(f"{target}, pos = {fn}(buf, pos)")
        elif t == "bytes":
            fn = "read_compact_bytes" if flexible else "read_bytes"
            e(f"{target}, pos = {fn}(buf, pos)")
        elif t == "records":
            fn = "read_compact_records" if flexible else "read_records"
            e(f"{target}, pos = {fn}(buf, pos)")
        elif t == "uuid":
            e(f"{target}, pos = read_uuid(buf, pos)")
        else:
            fn = self.decoder_for(f.type, f.children, v, flexible)
            e(f"{target}, pos = {fn}(buf, pos)")

    def decode_field(self, e: Emitter, f: Field, target: str, flexible: bool, v: int) -> None:
        if f.array:
            n = self.fresh("n")
            fn = "read_compact_array_length" if flexible else "read_array_length"
            e(f"{n}, pos = {fn}(buf, pos)")
            e(f"if {n} < 0:")
            e.indent()
            if f.nullable_in(v):
                e(f"if {n} != -1:")
                e.indent()
                e(f"raise DecodeError('bad length for {f.name}')")
                e.dedent()
                e(f"{target} = None")
            else:
                e(f"raise DecodeError('null {f.name} is not allowed')")
            e.dedent()
            e("else:")
            e.indent()
            if f.type in FIXED and f.type != "bool":
                e(f"{target}, pos = read_fixed_array(buf, pos, {n}, {FIXED[f.type][0]})")
            else:
                item = self.fresh("x")
                e(f"{target} = []")
                e(f"for _ in range({n}):")
                e.indent()
                self.decode_value(e, f, item, flexible, v)
                e(f"{target}.append({item})")
                e.dedent()
            e.dedent()
        elif f.is_struct and f.nullable_in(v):
            marker = self.fresh("m")
            e(f"({marker},) = I8.unpack_from(buf, pos)")
            e("pos += 1")
            e(f"if {marker} < 0:")
            e.indent()
            e(f"{target} = None")
            e.dedent()
            e("else:")
            e.indent()
            self.decode_value(e, f, target, flexible, v)
            e.dedent()
        else:
            self.decode_value(e, f, target, flexible, v)

    def decoder_for(self, cls: str, fields: list[Field], v: int, flexible: bool) -> str:
        return self.numbered_fresh(lambda: self._decoder_for(cls, fields, v, flexible))

    def _decoder_for(self, cls: str, fields: list[Field], v: int, flexible: bool) -> str:
        e = Emitter()
        e("def FUNC(buf, pos):")
        e.indent()
        present = [f for f in fields if f.present(v)]
        tagged = [f for f in present if f.tag is not None and flexible]
        locals_ = {f.name: f"f_{f.name}" for f in fields}
        for run in fixed_runs([f for f in present if f.tag is None]):
            if len(run) == 1:
                self.decode_field(e, run[0], locals_[run[0].name], flexible, v)
                continue
            targets = ", ".join(locals_[f.name] for f in run)
            e(f"{targets} = {self.run_struct(run)}.unpack_from(buf, pos)")
            e(f"pos += {sum(FIXED[f.type][2] for f in run)}")
        if flexible:
            for f in tagged:
                e(f"{locals_[f.name]} = {python_default(f)}")
        if flexible:
            e("ntags, pos = read_uvarint(buf, pos)")
            e("for _ in range(ntags):")
            e.indent()
            if tagged:
                e("tag, size, pos = read_tag_header(buf, pos)")
                e("end = pos + size")
                for i, f in enumerate(sorted(tagged, key=lambda f: f.tag)):
                    e(f"{'if' if i == 0 else 'elif'} tag == {f.tag}:")
                    e.indent()
                    self.decode_field(e, f, locals_[f.name], flexible, v)
                    e.dedent()
                e("pos = end")
            else:
                e("tag, pos = read_uvarint(buf, pos)")
                e("pos = skip_tagged_field(buf, pos)")
            e.dedent()
        args = []
        for f in fields:
            if f.present(v) and (f.tag is None or flexible):
                args.append(locals_[f.name])
            else:
                args.append(python_default(f))
        e(f"return {cls}({', '.join(args)}), pos")
        return self.register("_dec", cls, v, e)

    def numbered_fresh(self, build):
        """Run ``build`` with local variable numbering restarted, so that identical
        functions get identical text and are shared between versions."""
        saved, self.var = self.var, 0
        try:
            return build()
        finally:
            self.var = saved

    def register(self, prefix: str, cls: str, v: int, e: Emitter) -> str:
        body = "\n".join(e.lines)
        if body in self.functions:
            return self.functions[body]
        name = f"{prefix}_{cls}_v{v}"
        self.functions[body] = name
        self.chunks.append(body.replace("FUNC", name, 1))
        return name

    # encoding -----------------------------------------------------------

    def encode_value(self, e: Emitter, f: Field, value: str, flexible: bool, v: int) -> None:
        t = f.type
        if t in FIXED:
            e(f"out += {FIXED[t][0]}.pack({value})")
        elif t == "string":
            fn = "write_compact_string" if flexible else "write_string"
            e(f"{fn}(out, {value})")
        elif t == "bytes":
            fn = "write_compact_bytes" if flexible else "write_bytes"
            e(f"{fn}(out, {value})")
        elif t == "records":
            fn = "write_compact_records" if flexible else "write_records"
            e(f"{fn}(w, {value})")
            e("out = w.buf")
        elif t == "uuid":
            e(f"out += {value}")
        else:
            fn = self.encoder_for(f.type, f.children, v, flexible)
            if f.cacheable:
                self.cacheable.setdefault(f.type, {})[v] = fn
                e(f"if {value}.__class__ is Encoded:")
                e.indent()
                e(f"out += {value}")
                e.dedent()
                e("else:")
                e.indent()
            e(f"{fn}(w, {value})")
            e("out = w.buf")
            if f.cacheable:
                e.dedent()

    def encode_field(self, e: Emitter, f: Field, value: str, flexible: bool, v: int) -> None:
        nullable = f.nullable_in(v)
        if f.array:
            tmp = self.fresh("a")
            e(f"{tmp} = {value}")
            if not nullable:
                e(f"if {tmp} is None:")
                e.indent()
                e(f"{tmp} = []")
                e.dedent()
            else:
                e(f"if {tmp} is None:")
                e.indent()
                e("out.append(0)" if flexible else "out += b'\\xff\\xff\\xff\\xff'")
                e.dedent()
                e("else:")
                e.indent()
            if flexible:
                e(f"write_uvarint(out, len({tmp}) + 1)")
            else:
                e(f"out += I32.pack(len({tmp}))")
            if f.type in FIXED and f.type != "bool":
                e(f"out += array_struct({FIXED[f.type][0]}, len({tmp})).pack(*{tmp})")
            else:
                item = self.fresh("x")
                e(f"for {item} in {tmp}:")
                e.indent()
                self.encode_value(e, f, item, flexible, v)
                e.dedent()
            if nullable:
                e.dedent()
        elif f.is_struct and nullable:
            e(f"if {value} is None:")
            e.indent()
            e("out += b'\\xff'")
            e.dedent()
            e("else:")
            e.indent()
            e("out += b'\\x01'")
            self.encode_value(e, f, value, flexible, v)
            e.dedent()
        elif f.type in ("string", "bytes", "records") and not nullable:
            # Null where the wire has no null: written empty (records default to null).
            empty = "''" if f.type == "string" else "b''"
            self.encode_value(e, f, f"({value} if {value} is not None else {empty})", flexible, v)
        else:
            self.encode_value(e, f, value, flexible, v)

    def encoder_for(self, cls: str, fields: list[Field], v: int, flexible: bool) -> str:
        return self.numbered_fresh(lambda: self._encoder_for(cls, fields, v, flexible))

    def _encoder_for(self, cls: str, fields: list[Field], v: int, flexible: bool) -> str:
        e = Emitter()
        e("def FUNC(w, o):")
        e.indent()
        e("out = w.buf")
        present = [f for f in fields if f.present(v)]
        for run in fixed_runs([f for f in present if f.tag is None]):
            if len(run) == 1:
                self.encode_field(e, run[0], f"o.{run[0].name}", flexible, v)
            else:
                values = ", ".join(f"o.{f.name}" for f in run)
                e(f"out += {self.run_struct(run)}.pack({values})")
        if flexible:
            tagged = sorted((f for f in present if f.tag is not None), key=lambda f: f.tag)
            if not tagged:
                e("out.append(0)")
            else:
                e("tags = []")
                for f in tagged:
                    e(f"if o.{f.name} != {self.default_instance(f)}:")
                    e.indent()
                    e("outer, w.buf = w.buf, bytearray()")
                    e("out = w.buf")
                    self.encode_field(e, f, f"o.{f.name}", flexible, v)
                    e(f"tags.append(({f.tag}, w.buf))")
                    e("w.buf = out = outer")
                    e.dedent()
                e("write_uvarint(out, len(tags))")
                e("for tag, data in tags:")
                e.indent()
                e("write_uvarint(out, tag)")
                e("write_uvarint(out, len(data))")
                e("out += data")
                e.dedent()
        return self.register("_enc", cls, v, e)

    # module -------------------------------------------------------------

    def struct_types(self) -> tuple[dict[str, list[Field]], set[str]]:
        """The schema's struct types (name -> fields, innermost first), and the cacheable."""
        seen: dict[str, list[Field]] = {}
        cacheable: set[str] = set()

        def walk(fields: list[Field]) -> None:
            for f in fields:
                if f.cacheable:
                    cacheable.add(f.type)
                if f.is_struct and f.type not in seen:
                    walk(f.children)
                    seen[f.type] = f.children

        for msg in self.schema.messages:
            walk(msg.fields)
        return seen, cacheable

    def struct_classes(self) -> list[str]:
        seen, cacheable = self.struct_types()
        return [
            self.class_source(name, fields, self.encoded_method(name) if name in cacheable else [])
            for name, fields in seen.items()
        ]

    @staticmethod
    def encoded_method(name: str) -> list[str]:
        return [
            "def encode_bytes(self, version):",
            "    # As the message's version ``version`` encodes it: an ``Encoded`` to reuse.",
            "    w = Writer()",
            *lookup("encoder", "_ENCODERS", name, indent="    "),
            "    encoder(w, self)",
            "    return Encoded(b''.join(w.finish()))",
        ]

    def modules(self) -> tuple[str, str]:
        """The classes' module and their codecs' module."""
        s = self.schema
        classes = self.struct_classes()
        tables = []
        for msg in s.messages:
            decoders, encoders = [], []
            for v in range(msg.versions.low, msg.versions.high + 1):
                flexible = msg.flexible is not None and v in msg.flexible
                decoders.append(f"{v}: {self.decoder_for(msg.class_name, msg.fields, v, flexible)}")
                encoders.append(f"{v}: {self.encoder_for(msg.class_name, msg.fields, v, flexible)}")
            extra = [
                f"VERSIONS = ({msg.versions.low}, {msg.versions.high})",
                "@staticmethod",
                "def decode(buf, pos, version):",
                *lookup("decoder", "_DECODERS", msg.class_name, indent="    "),
                "    return decoder(buf, pos)",
                "def encode(self, version):",
                "    w = Writer()",
                *lookup("encoder", "_ENCODERS", msg.class_name, indent="    "),
                "    encoder(w, self)",
                "    return w.finish()",
                "def encode_bytes(self, version):",
                "    return b''.join(self.encode(version))",
            ]
            classes.append(self.class_source(msg.class_name, msg.fields, extra))
            tables.append((f"_DECODERS_{msg.class_name}", ", ".join(decoders)))
            tables.append((f"_ENCODERS_{msg.class_name}", ", ".join(encoders)))
        for name, encoders in self.cacheable.items():
            table = ", ".join(f"{v}: {fn}" for v, fn in sorted(encoders.items()))
            tables.append((f"_ENCODERS_{name}", table))
        names = [name for name, _ in tables]
        return self.classes_module(classes, names), self.codecs_module(tables)

    def classes_module(self, classes: list[str], tables: list[str]) -> str:
        """The classes, and the empty tables of their encoders and decoders by version."""
        s = self.schema
        head = [
            f"# Generated by scripts/gen_protocol.py from protocol/{s.module}.schema. Do not edit.",
            "# ruff: noqa",
            "from kpybroker.protocol._codec import ZERO_UUID, Encoded, Writer, codec_loader",
            "",
            "_MISSING = object()",
            "",
        ]
        if s.api_key is not None:
            head.append(f"API_KEY = {s.api_key}")
        head.append(f"NAME = {s.name!r}")
        head.append(f"VERSIONS = ({s.versions.low}, {s.versions.high})")
        flex = None if s.flexible is None else s.flexible.low
        head.append(f"FLEXIBLE_FROM = {flex}")
        head.append("")
        head.append(f"#: By version; filled by {CODEC_PACKAGE}.{s.module}, imported on first use.")
        head += [f"{name} = {{}}" for name in tables]
        head.append(f"_codec = codec_loader({CODEC_PACKAGE + '.' + s.module!r})")
        return "\n\n\n".join(["\n".join(head), *classes]) + "\n"

    def codecs_module(self, tables: list[tuple[str, str]]) -> str:
        """The encoders and decoders, which fill the tables (name, entries) of the classes."""
        s = self.schema
        imported = sorted({*self.classes_used(), *(name for name, _ in tables)})
        head = [
            f"# Generated by scripts/gen_protocol.py from protocol/{s.module}.schema. Do not edit.",
            "# ruff: noqa",
            "from struct import Struct",
            "",
            CODEC_IMPORTS,
            f"from kpybroker.protocol.messages.{s.module} import (",
            *(f"    {name}," for name in imported),
            ")",
        ]
        constants = [f"{n} = Struct('>{fmt}')" for n, fmt in sorted(self.structs.items())]
        constants += [f"{n} = {cls}()" for n, cls in sorted(self.defaults.items())]
        fills = [f"{name}.update({{{table}}})" for name, table in tables]
        parts = ["\n".join(head), "\n".join(constants), *self.chunks, "\n".join(fills)]
        return "\n\n\n".join(parts) + "\n"

    def classes_used(self) -> list[str]:
        """The class names the codecs build or compare with: every class of the schema."""
        return [*self.struct_types()[0], *(msg.class_name for msg in self.schema.messages)]


CODEC_IMPORTS = """from kpybroker.protocol._codec import (
    BOOL, F64, I8, I16, I32, I64, U16, ZERO_UUID, DecodeError, Encoded,
    UnsupportedVersionError, Writer,
    read_array_length, read_bytes, read_compact_array_length, read_compact_bytes,
    read_compact_records, read_compact_string, read_fixed_array, read_records,
    read_string, read_tag_header, read_uuid, read_uvarint, skip_tagged_field,
    write_bytes, write_compact_bytes, write_compact_records, write_compact_string,
    array_struct, write_records, write_string, write_uvarint,
)"""


def lookup(kind: str, tables: str, cls: str, indent: str) -> list[str]:
    """Lines setting ``kind`` to the function for ``version``: from the table, else through
    ``_codec``, which imports the codecs module first (and raises for a version without one)."""
    return [
        f"{indent}try:",
        f"{indent}    {kind} = {tables}_{cls}[version]",
        f"{indent}except KeyError:",
        f"{indent}    {kind} = _codec({tables}_{cls}, version, {cls!r})",
    ]


def registry_module(schemas: list[Schema]) -> str:
    """The package's ``__init__``: every API's module by key, each imported at its first
    lookup, and the version from which its requests are flexible, known without it."""
    apis = sorted((s for s in schemas if s.api_key is not None), key=lambda s: s.api_key)
    lines = [
        "# Generated by scripts/gen_protocol.py. Do not edit.",
        '"""Every API that has a schema: key -> its module (name, request and response classes),',
        'imported at its first lookup; and the version from which its requests are flexible."""',
        "# ruff: noqa",
        "",
        "from kpybroker.protocol.lazy_modules import LazyModules",
        "",
        "FLEXIBLE_FROM = {",
    ]
    for s in apis:
        lines.append(f"    {s.api_key}: {None if s.flexible is None else s.flexible.low},")
    lines.append("}")
    lines.append("")
    lines.append("SCHEMAS = LazyModules(__name__, {")
    for s in apis:
        lines.append(f"    {s.api_key}: {s.module!r},")
    lines.append("})")
    return "\n".join(lines) + "\n"


def generate() -> dict[Path, str]:
    schemas = [parse_schema(p) for p in sorted(SCHEMA_DIR.glob("*.schema"))]
    keys: dict[int, str] = {}
    for s in schemas:
        if s.api_key is not None:
            if s.api_key in keys:
                raise SchemaError(f"api key {s.api_key} in {keys[s.api_key]} and {s.module}")
            keys[s.api_key] = s.module
    out = {}
    for s in schemas:
        out[OUT_DIR / f"{s.module}.py"], out[CODEC_DIR / f"{s.module}.py"] = Generator(s).modules()
    out[OUT_DIR / "__init__.py"] = registry_module(schemas)
    out[CODEC_DIR / "__init__.py"] = CODECS_PACKAGE_DOC
    return out


CODECS_PACKAGE_DOC = (
    "# Generated by scripts/gen_protocol.py. Do not edit.\n"
    '"""The encoders and decoders of the message classes, one module per schema: each is\n'
    'imported by its classes\' module at their first encode or decode (start-up time)."""\n'
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if generated code is stale")
    args = parser.parse_args()
    try:
        files = generate()
    except SchemaError as exc:
        print(f"schema error: {exc}", file=sys.stderr)
        return 2
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    existing = {*OUT_DIR.glob("*.py"), *CODEC_DIR.glob("*.py")}
    orphans = existing - set(files)
    if args.check:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)}", file=sys.stderr)
        for p in orphans:
            print(f"orphan: {p.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale or orphans else 0
    CODEC_DIR.mkdir(parents=True, exist_ok=True)
    for p in stale:
        p.write_text(files[p])
    for p in orphans:
        p.unlink()
    print(f"generated {len(files)} modules ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
