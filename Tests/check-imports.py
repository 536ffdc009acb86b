#!/usr/bin/env python3
"""Fails when a target of the package imports a module it does not declare (docs/architecture.md).

SwiftPM's `--explicit-target-dependency-import-check error` catches a target that imports another
target of this package without declaring it, but not a product of a dependency: every module built
for any target is importable by all of them (CurfewStoreTests could import GRDB undeclared). This
reads the package's own description (`swift package dump-package`), then every `import` in each
target's Swift sources, and names each module that is neither declared (as a target, or a product of
a dependency) nor part of the toolchain or the C library.

Usage: check-imports.py [PACKAGE_DIR]   (exit 1 and one line per undeclared import when any)
"""
import json
import os
import re
import subprocess
import sys

# Modules of the toolchain and the platform: always importable.
TOOLCHAIN = {
    "Swift", "Foundation", "FoundationEssentials", "FoundationNetworking", "FoundationXML", "Dispatch",
    "Glibc", "Musl", "Darwin", "Synchronization", "Testing", "XCTest", "_Concurrency", "_StringProcessing",
    "os", "Android", "Bionic", "WinSDK", "ucrt", "CoreFoundation",
}

# `import X`, `@testable import X`, `import struct X.Y`, `internal import X`, ... at the start of a line
# (leading blanks allowed: imports inside `#if canImport(...)`).
IMPORT = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"
    r"(?:(?:struct|class|enum|protocol|typealias|func|let|var)\s+)?([A-Za-z_][A-Za-z0-9_]*)"
)


def target_directory(package_dir, target):
    if target.get("path"):
        return os.path.join(package_dir, target["path"])
    base = "Tests" if target["type"] == "test" else "Sources"
    return os.path.join(package_dir, base, target["name"])


def imports_of(directory):
    """(module, file, line) for each import in the Swift files under `directory`, outside
    multi-line string literals."""
    found = []
    for root, _, files in os.walk(directory):
        for name in sorted(files):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(root, name)
            in_string = False  # inside a multi-line string literal (scripts the tests embed)
            with open(path, encoding="utf-8") as source:
                for number, line in enumerate(source, 1):
                    if not in_string:
                        match = IMPORT.match(line)
                        if match:
                            found.append((match.group(1), path, number))
                    if line.count('"""') % 2 == 1:
                        in_string = not in_string
    return found


def main():
    package_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    swift = os.environ.get("SWIFT", "swift")
    description = subprocess.run(
        [swift, "package", "dump-package", "--package-path", package_dir],
        check=True, capture_output=True, text=True,
    ).stdout
    package = json.loads(description)
    targets = {target["name"]: target for target in package["targets"]}
    problems = []
    for target in package["targets"]:
        if target["type"] in ("system", "binary", "plugin", "macro"):
            continue
        declared = {target["name"]}
        for dependency in target["dependencies"]:
            for kind in ("byName", "target", "product"):
                if kind in dependency:
                    declared.add(dependency[kind][0])
        for module, path, number in imports_of(target_directory(package_dir, target)):
            if module in declared or module in TOOLCHAIN:
                continue
            relative = os.path.relpath(path, package_dir)
            if module in targets:
                problems.append(f"{relative}:{number}: {target['name']} imports target {module} without declaring it")
            else:
                problems.append(
                    f"{relative}:{number}: {target['name']} imports {module}, which is neither a declared dependency nor the toolchain's"
                )
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} undeclared import(s): declare each module in Package.swift's dependencies of its target")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
