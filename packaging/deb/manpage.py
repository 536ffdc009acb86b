#!/usr/bin/env python3
"""Turns a Swift ArgumentParser command's own help (`PROGRAM --experimental-dump-help`, ToolInfo JSON
version 0) into a roff man page, so the pages never drift from the binaries.

    manpage.py PROGRAM SECTION DATE VERSION SECTIONS > PROGRAM.SECTION

PROGRAM is run with --experimental-dump-help (it may be a path); the page is named after the command
the dump describes. Every subcommand, at any depth, gets a subsection with its usage, abstract,
discussion, arguments and options; options that four or more subcommands share (--state-dir,
--json, ...) are described once, under COMMANDS, and a command's usage shows them as
[common options]. SECTIONS is a roff file of the hand-written sections (packaging/deb/curfew.1.in):
its DESCRIPTION follows the SYNOPSIS, the rest (EXAMPLES, ENVIRONMENT, FILES, EXIT STATUS, SEE
ALSO, ...) follow the commands, in the file's order.
"""
import json
import re
import subprocess
import sys


def roff(text):
    """Escapes text for roff: backslashes, and a leading dot or quote that would read as a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def paragraphs(text):
    """Discussion text as roff paragraphs (blank lines separate them)."""
    out = []
    for block in text.strip().split("\n\n"):
        if block.strip():
            out.append(".PP\n" + roff(block.strip()))
    return "\n".join(out)


def spelled(name):
    kind, value = name["kind"], name["name"]
    return {"long": "--", "short": "-", "longWithSingleDash": "-"}.get(kind, "--") + value


def argument_label(argument):
    names = argument.get("names") or []
    value = argument.get("valueName") or "value"
    kind = argument["kind"]
    if kind == "positional":
        label = "<" + value + ">"
        if argument.get("isRepeating"):
            label += " ..."
        return label
    label = ", ".join(spelled(n) for n in names)
    if kind == "option":
        label += " <" + value + ">"
    return label


def shown(command, top):
    """The arguments a page lists: ArgumentParser's own --help and --version only for the top command."""
    for argument in command.get("arguments") or []:
        if not argument.get("shouldDisplay", True):
            continue
        preferred = (argument.get("preferredName") or {}).get("name")
        if not top and argument["kind"] == "flag" and preferred in ("help", "version"):
            continue
        yield argument


COMMON = set()


def key(argument):
    return ((argument.get("preferredName") or {}).get("name"), argument.get("abstract"))


def usage(command, path):
    parts = ["\\fB" + roff(" ".join(path)) + "\\fR"]
    common = False
    for argument in shown(command, len(path) == 1):
        if key(argument) in COMMON:
            common = True
            continue
        preferred = argument.get("preferredName")
        kind = argument["kind"]
        if kind == "positional":
            word = "<" + roff(argument.get("valueName") or "value") + ">"
            if argument.get("isRepeating"):
                word += " ..."
        else:
            word = "\\fB" + roff(spelled(preferred)) + "\\fR" if preferred else ""
            if kind == "option":
                word += " <" + roff(argument.get("valueName") or "value") + ">"
        if argument.get("isOptional"):
            word = "[" + word + "]"
        parts.append(word)
    if common:
        parts.append("[\\fIcommon options\\fR]")
    if command.get("subcommands"):
        parts.append("<command>")
    return " ".join(parts)


def arguments_section(command, top, only=None):
    out = []
    for argument in shown(command, top):
        if only is None and key(argument) in COMMON:
            continue
        if only is not None and key(argument) not in only:
            continue
        out.append(".TP\n\\fB" + roff(argument_label(argument)) + "\\fR")
        text = argument.get("abstract") or ""
        default = argument.get("defaultValue")
        if default not in (None, "") and argument["kind"] == "option" and "default" not in text:
            text += " (default: " + default + ")"
        if argument.get("allValues"):
            text += " Values: " + ", ".join(argument["allValues"]) + "."
        out.append(roff(text.strip()) if text.strip() else "")
        if argument.get("discussion"):
            discussion = argument["discussion"]
            if isinstance(discussion, dict):
                discussion = discussion.get("staticText") or ""
            if discussion:
                out.append(".IP\n" + roff(discussion))
    return "\n".join(out)


def walk(command, path):
    """Yields (path, command) for every subcommand below `command`, depth first, in declared order."""
    for sub in command.get("subcommands") or []:
        # ArgumentParser's own `help` command is the --help every command has.
        if not sub.get("shouldDisplay", True) or sub["commandName"] == "help":
            continue
        sub_path = path + [sub["commandName"]]
        yield sub_path, sub
        yield from walk(sub, sub_path)


def split_sections(text):
    """The hand-written file as (title, body) pairs, in order (lines before the first .SH, comments, are dropped)."""
    sections = []
    for block in re.split(r"^\.SH ", text, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        sections.append((title.strip().strip('"'), body.strip("\n")))
    return sections


def page(tool, section, date, version, extra):
    root = tool["command"]
    name = root["commandName"]
    subcommands = list(walk(root, [name]))
    counts = {}
    for _, sub in subcommands:
        for argument in shown(sub, False):
            if argument["kind"] != "positional":
                counts[key(argument)] = counts.get(key(argument), 0) + 1
    COMMON.clear()
    COMMON.update(k for k, count in counts.items() if count >= 4)
    header = '.TH "{}" "{}" "{}" "{}" "{}"'.format(
        name.upper(), section, date, (name + " " + version).strip(),
        "System Administration" if section == "8" else "User Commands")
    sections = split_sections(extra)
    description = [body for title, body in sections if title == "DESCRIPTION"]
    out = [
        '.\\" Generated by packaging/deb/manpage.py from `' + name + " --experimental-dump-help` and "
        + name + "." + section + ".in; do not edit.",
        header,
        ".SH NAME",
        roff(name) + " \\- " + roff(root.get("abstract") or ""),
        ".SH SYNOPSIS",
        ("\\fB" + roff(name) + "\\fR <command> [\\fIoptions\\fR]") if subcommands
        else ("\\fB" + roff(name) + "\\fR [\\fIoptions\\fR]"),
    ]
    if description:
        out += [".SH DESCRIPTION", description[0]]
    elif root.get("discussion"):
        out += [".SH DESCRIPTION", paragraphs(root["discussion"])]
    if root.get("arguments"):
        out += [".SH OPTIONS", arguments_section(root, True)]
    if subcommands:
        out.append(".SH COMMANDS")
        if COMMON:
            out.append(".SS common options")
            out.append(".PP\nThese options are taken by the commands whose usage shows [\\fIcommon options\\fR]:")
            first = {}
            for _, sub in subcommands:
                for argument in shown(sub, False):
                    if key(argument) in COMMON and key(argument) not in first:
                        first[key(argument)] = argument
            out.append(arguments_section({"arguments": list(first.values())}, False, only=COMMON))
        for path, sub in subcommands:
            out.append(".SS " + roff(" ".join(path[1:])))
            out.append(usage(sub, path))
            if sub.get("abstract"):
                out.append(".PP\n" + roff(sub["abstract"]))
            if sub.get("discussion"):
                out.append(paragraphs(sub["discussion"]))
            listed = arguments_section(sub, False)
            if listed:
                out += [".PP\n.RS 4", listed, ".RE"]
    for title, body in sections:
        if title != "DESCRIPTION":
            out += [".SH " + title, body]
    return "\n".join(line for line in out if line != "") + "\n"


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: manpage.py PROGRAM SECTION DATE VERSION SECTIONS")
    program, section, date, version = sys.argv[1:5]
    with open(sys.argv[5], encoding="utf-8") as file:
        extra = file.read()
    dump = subprocess.run([program, "--experimental-dump-help"], capture_output=True, text=True)
    if dump.returncode != 0:
        sys.exit("manpage.py: {} --experimental-dump-help exited {}: {}".format(program, dump.returncode, dump.stderr.strip()))
    try:
        tool = json.loads(dump.stdout)
    except json.JSONDecodeError as error:
        sys.exit("manpage.py: {} --experimental-dump-help is not JSON: {}".format(program, error))
    if tool.get("serializationVersion") != 0 or "command" not in tool:
        sys.exit("manpage.py: unknown help format (serializationVersion {})".format(tool.get("serializationVersion")))
    sys.stdout.write(page(tool, section, date, version, extra))


if __name__ == "__main__":
    main()
