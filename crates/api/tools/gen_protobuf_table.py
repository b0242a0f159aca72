#!/usr/bin/env python3
"""Generates crates/api/src/protobuf/table.rs: the protobuf field table of every
message Berth serves.

Inputs (read with `git show <tag>:<path>` from local clones, nothing is copied):
  - `generated.proto` of k8s.io/api and k8s.io/apimachinery: field numbers and wire
    types (scalar, message, repeated, map);
  - the Go structs' tags in the same packages: the JSON name, `omitempty`, whether
    the Go field is a pointer, and `json:",inline"` embeddings (which the proto keeps
    as a nested message but JSON flattens).

Usage:
  gen_protobuf_table.py API_GIT_DIR APIMACHINERY_GIT_DIR TAG > crates/api/src/protobuf/table.rs
"""

import re
import subprocess
import sys

API_PACKAGES = {
    # path in k8s.io/api: API group
    "core/v1": "",
    "apps/v1": "apps",
    "batch/v1": "batch",
    "certificates/v1": "certificates.k8s.io",
    "autoscaling/v1": "autoscaling",
    "autoscaling/v2": "autoscaling",
    "networking/v1": "networking.k8s.io",
    "discovery/v1": "discovery.k8s.io",
    "coordination/v1": "coordination.k8s.io",
    "events/v1": "events.k8s.io",
    "policy/v1": "policy",
    "rbac/v1": "rbac.authorization.k8s.io",
    "scheduling/v1": "scheduling.k8s.io",
    "storage/v1": "storage.k8s.io",
    # Subresource and review bodies: serviceaccounts/token, `kubectl auth can-i`.
    "authentication/v1": "authentication.k8s.io",
    "authorization/v1": "authorization.k8s.io",
}
MACHINERY_PACKAGES = {
    "pkg/apis/meta/v1": "meta.k8s.io",
    "pkg/runtime": None,
    "pkg/util/intstr": None,
    "pkg/api/resource": None,
}
# Messages whose JSON form is not an object of their fields.
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "RawJson",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "RawJson",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    # Go `type X []string`: a message with `repeated string items = 1` on the wire.
    "k8s.io.apimachinery.pkg.apis.meta.v1.Verbs": "StringList",
    "k8s.io.api.authentication.v1.ExtraValue": "StringList",
    "k8s.io.api.authorization.v1.ExtraValue": "StringList",
    "k8s.io.api.certificates.v1.ExtraValue": "StringList",
}
SCALARS = {
    "string": "Str",
    "bytes": "Bytes",
    "bool": "Bool",
    "int32": "I32",
    "int64": "I64",
    "uint32": "U32",
    "uint64": "U64",
    "double": "F64",
    "float": "F32",
}


def show(git_dir, tag, path):
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{tag}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def ls(git_dir, tag, path):
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "--name-only", f"{tag}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout
    return [n for n in out.split() if n.endswith(".go") and not n.endswith("_test.go")]


FIELD_RE = re.compile(r"^\s*(optional|repeated|required)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAP_RE = re.compile(r"^\s*map<\s*(\S+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def parse_proto(text):
    """-> (package, {message: [(label, type, name, number, keytype)]})"""
    pkg = re.search(r"^package\s+([\w.]+);", text, re.M).group(1)
    msgs = {}
    cur = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("//"):
            continue
        m = re.match(r"^message\s+(\w+)\s*\{", s)
        if m:
            cur = m.group(1)
            msgs[cur] = []
            continue
        if s == "}":
            cur = None
            continue
        if cur is None:
            continue
        m = FIELD_RE.match(line)
        if m:
            msgs[cur].append((m.group(1), m.group(2), m.group(3), int(m.group(4)), None))
            continue
        m = MAP_RE.match(line)
        if m:
            msgs[cur].append(("map", m.group(2), m.group(3), int(m.group(4)), m.group(1)))
    return pkg, msgs


STRUCT_RE = re.compile(r"^type\s+(\w+)\s+struct\s*\{")
GOFIELD_RE = re.compile(r"^\s*(?:(\w+)\s+)?([\w.*\[\]]+(?:\[[\w.*]+\][\w.*\[\]]+)?)\s+`([^`]*)`")


def parse_go(text):
    """-> {struct: {"fields": {number: (json, omitempty, pointer, inline)}, "typemeta": bool}}"""
    out = {}
    cur = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("//"):
            continue
        m = STRUCT_RE.match(line)
        if m:
            cur = {"fields": {}, "typemeta": False}
            out[m.group(1)] = cur
            continue
        if line.startswith("}"):
            cur = None
            continue
        if cur is None:
            continue
        m = GOFIELD_RE.match(line)
        if not m:
            continue
        name, gotype, tags = m.group(1), m.group(2), m.group(3)
        if name is None and gotype.endswith("TypeMeta"):
            cur["typemeta"] = True
        js = re.search(r'json:"([^"]*)"', tags)
        pb = re.search(r'protobuf:"([^"]*)"', tags)
        if not js or not pb:
            continue
        parts = js.group(1).split(",")
        pbparts = pb.group(1).split(",")
        if len(pbparts) < 2 or not pbparts[1].isdigit():
            continue
        number = int(pbparts[1])
        cur["fields"][number] = (
            parts[0],
            "omitempty" in parts[1:],
            gotype.startswith("*"),
            parts[0] == "" and "inline" in parts[1:],
        )
    return out


def main():
    api_git, mach_git, tag = sys.argv[1:4]
    protos = {}  # full message name -> fields
    gostructs = {}  # full message name -> go info
    groups = {}  # proto package -> (group, version)
    sources = [(api_git, p, g) for p, g in API_PACKAGES.items()] + [
        (mach_git, p, g) for p, g in MACHINERY_PACKAGES.items()
    ]
    for git_dir, path, group in sources:
        pkg, msgs = parse_proto(show(git_dir, tag, f"{path}/generated.proto"))
        go = {}
        for f in ls(git_dir, tag, path):
            go.update(parse_go(show(git_dir, tag, f"{path}/{f}")))
        if group is not None:
            groups[pkg] = (group, path.split("/")[-1])
        for name, fields in msgs.items():
            protos[f"{pkg}.{name}"] = (pkg, fields)
            if name in go:
                gostructs[f"{pkg}.{name}"] = go[name]

    def resolve(pkg, t):
        if t in SCALARS:
            return t
        if t.startswith("."):
            return t[1:]
        return f"{pkg}.{t}"

    # Every message of the listed packages, plus whatever they reach.
    todo = sorted(n for n in protos if not n.startswith("k8s.io.apimachinery.pkg.runtime.schema"))
    index = {n: i for i, n in enumerate(todo)}
    missing = [
        resolve(protos[n][0], f[1])
        for n in todo
        for f in protos[n][1]
        if resolve(protos[n][0], f[1]) not in SCALARS and resolve(protos[n][0], f[1]) not in index
    ]
    if missing:
        sys.exit(f"unresolved message types: {sorted(set(missing))}")

    def ty(t):
        return f"Ty::{SCALARS[t]}" if t in SCALARS else f"Ty::Msg({index[t]})"

    w = sys.stdout.write
    w("// @generated by crates/api/tools/gen_protobuf_table.py from the `generated.proto`\n")
    w(f"// files and Go struct tags of k8s.io/api and k8s.io/apimachinery at {tag}\n")
    w("// (`gen_protobuf_table.py <api.git> <apimachinery.git> <tag> > table.rs`).\n")
    w("// Do not edit by hand.\n\n")
    w("use super::schema::{Card, Field, Message, Special, Ty};\n")
    w("use super::schema::{INLINE, OMITEMPTY, POINTER};\n\n")
    w("const fn f(number: u32, json: &'static str, ty: Ty, card: Card, flags: u8) -> Field {\n")
    w("    Field {\n        number,\n        json,\n        ty,\n        card,\n        flags,\n    }\n}\n\n")
    w("/// Every message, sorted by full name; `Ty::Msg` indexes into it.\n")
    w("#[rustfmt::skip]\n")
    w("pub static MESSAGES: &[Message] = &[\n")
    for i, name in enumerate(todo):
        pkg, fields = protos[name]
        go = gostructs.get(name, {"fields": {}, "typemeta": False})
        if name not in gostructs and name not in SPECIAL:
            sys.stderr.write(f"no Go struct: {name}\n")
        for fl in fields:
            if name in gostructs and fl[3] not in go["fields"]:
                sys.stderr.write(f"no Go tag: {name}.{fl[2]}\n")
        special = SPECIAL.get(name, "None")
        w(f"    // {i}\n")
        w(f'    Message {{ name: "{name}", special: Special::{special}, top_level: {"true" if go["typemeta"] else "false"}, fields: &[\n')
        for label, t, pname, number, key in sorted(fields, key=lambda f: f[3]):
            json, omit, ptr, inline = go["fields"].get(number, (pname, True, label == "optional" and resolve(pkg, t) in SCALARS, False))
            flags = [fl for fl, on in (("OMITEMPTY", omit), ("POINTER", ptr), ("INLINE", inline)) if on] or ["0"]
            rt = resolve(pkg, t)
            if label == "map":
                card = f"Card::Map({ty(resolve(pkg, key))})"
            elif label == "repeated":
                card = "Card::Rep"
            else:
                card = "Card::One"
            w(f'        f({number}, "{json}", {ty(rt)}, {card}, {" | ".join(flags)}),\n')
        w("    ] },\n")
    w("];\n\n")
    w("/// Top-level kinds: (group, version, kind, index into `MESSAGES`).\n")
    w("#[rustfmt::skip]\n")
    w("pub static KINDS: &[(&str, &str, &str, u16)] = &[\n")
    for name in todo:
        pkg = protos[name][0]
        go = gostructs.get(name)
        if pkg in groups and go and go["typemeta"]:
            g, v = groups[pkg]
            w(f'    ("{g}", "{v}", "{name.rsplit(".", 1)[1]}", {index[name]}),\n')
    w("];\n")


if __name__ == "__main__":
    main()
