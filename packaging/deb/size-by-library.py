#!/usr/bin/env python3
"""What is left in a program, by library: the sizes of its defined symbols (`nm -S`, before strip)
summed by the module or library they belong to, then the sections (`size -A`) for what no symbol
covers (Swift metadata, unwind tables, relocations).

    packaging/deb/size-by-library.py .build/container-static/release/curfew-multicall

Swift symbols ($s<len><Module>...) go to their module; C and C++ symbols by prefix: ICU (versioned
names, the icu_NN namespace, its data icudtNN), BoringSSL (CCryptoBoringSSL), libdispatch, the Swift
runtime (swift_*); the rest is "other C/C++". Sizes are of the unstripped file's symbols; strip
removes only symbol tables and debug sections, not what is counted here.
"""
import collections
import re
import subprocess
import sys


def library(symbol: str) -> str:
    if symbol.startswith("$s") or symbol.startswith("_$s"):
        body = symbol.lstrip("_")[2:]
        match = re.match(r"(\d+)", body)
        if match:
            length = int(match.group(1))
            name = body[len(match.group(1)):len(match.group(1)) + length]
            if name:
                return name
        return "Swift"  # standard-library substitutions ($sSS..., $ss...)
    if symbol.startswith("icudt"):
        return "ICU data"
    if re.search(r"_7\d$", symbol) or "icu_7" in symbol:
        return "ICU"
    if "CCryptoBoringSSL" in symbol:
        return "BoringSSL"
    if "dispatch" in symbol:
        return "libdispatch"
    if symbol.startswith("swift_") or symbol.startswith("_swift") or "swift" in symbol.lower():
        return "Swift runtime"
    if "sqlite3" in symbol:
        return "SQLite"
    return "other C/C++"


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: size-by-library.py BINARY")
    binary = sys.argv[1]
    nm = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True)
    sizes = collections.Counter()
    for line in nm.stdout.splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        _, size, _, name = parts
        sizes[library(name)] += int(size, 16)
    total = sum(sizes.values())
    print(f"{binary}: symbols by library (MiB)")
    for name, size in sizes.most_common(25):
        print(f"  {size / 1048576:8.2f}  {name}")
    rest = sum(size for _, size in sizes.most_common()[25:])
    if rest:
        print(f"  {rest / 1048576:8.2f}  ({len(sizes) - 25} more)")
    print(f"  {total / 1048576:8.2f}  in symbols")
    sections = subprocess.run(["size", "-A", binary], capture_output=True, text=True, check=True)
    allocated = 0
    print("sections (MiB):")
    for line in sections.stdout.splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and int(parts[1]) >= 262144:
            print(f"  {int(parts[1]) / 1048576:8.2f}  {parts[0]}")
        if len(parts) == 3 and parts[1].isdigit() and parts[2] != "0":
            allocated += int(parts[1])
    print(f"  {allocated / 1048576:8.2f}  loaded (sections with an address)")


main()
