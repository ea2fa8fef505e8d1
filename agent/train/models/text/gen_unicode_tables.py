#!/usr/bin/env python3
"""Generates agent/train/models/text/unicode_tables.cc: the Unicode data the CLIP tokenizer needs.

The reference (transformers' slow CLIPTokenizer without ftfy) cleans and normalises text with
CPython's own Unicode database (unicodedata.category, unicodedata.normalize("NFC"), str.lower,
str.split) and pre-tokenises with the `regex` module (\\p{L}, \\p{N}, IGNORECASE). So the tables
are generated from exactly those: CPython 3.11's unicodedata (Unicode 14.0.0, as on Debian 12's
python3) and the `regex` module (Debian: python3-regex). A character assigned after 14.0 is
category Cn to the reference and therefore dropped by its cleaning; the tables say the same.

Usage (Debian 12, packages python3 + python3-regex): /usr/bin/python3 agent/train/models/text/gen_unicode_tables.py > agent/train/models/text/unicode_tables.cc
Every assumption the C++ side relies on is asserted here.
"""
import sys
import unicodedata

import regex

assert unicodedata.unidata_version == "14.0.0", (
    "needs CPython 3.11's Unicode 14.0.0 (the reference's); got " + unicodedata.unidata_version)

MAX = 0x110000
SURROGATES = range(0xD800, 0xE000)

# Flag bits, mirrored in unicode_tables.h.
DROP, SPACE, SPLIT, LETTER, NUMBER, OTHER, CASED, CASE_IGNORABLE = (1 << i for i in range(8))

letter_re = regex.compile(r"[\p{L}]", regex.IGNORECASE)
number_re = regex.compile(r"[\p{N}]", regex.IGNORECASE)
other_re = regex.compile(r"[^\s\p{L}\p{N}]", regex.IGNORECASE)
space_re = regex.compile(r"\s")


def is_cased(c):
    return c.islower() or c.isupper() or c.istitle()


def is_case_ignorable(c):
    # CPython's Final_Sigma rule is the only user of Case_Ignorable: probe it through str.lower.
    if is_cased(c):
        return ("A\u03a3" + c).lower()[1] == "\u03c2"
    return ("A" + c + "\u03a3").lower()[-1] == "\u03c2"


def flags_of(cp):
    c = chr(cp)
    cat = unicodedata.category(c)
    # BasicTokenizer._clean_text
    if cp == 0 or cp == 0xFFFD or (cat.startswith("C") and c not in "\t\n\r"):
        return DROP
    if c in " \t\n\r" or cat == "Zs":
        return SPACE
    f = 0
    if c.isspace():
        f |= SPLIT
    if letter_re.fullmatch(c):
        f |= LETTER
    if number_re.fullmatch(c):
        f |= NUMBER
    if other_re.fullmatch(c):
        f |= OTHER
    # After cleaning and whitespace splitting, no character the regex sees is \s.
    assert not space_re.fullmatch(c) or f & SPLIT, hex(cp)
    assert bin(f & (LETTER | NUMBER | OTHER)).count("1") <= 1, hex(cp)
    if is_cased(c):
        f |= CASED
    if is_case_ignorable(c):
        f |= CASE_IGNORABLE
    return f


def runs(values):
    """[(start, value)] where each run lasts until the next start."""
    out = []
    for cp, v in values:
        if not out or out[-1][1] != v:
            out.append((cp, v))
    return out


def code_points():
    return (cp for cp in range(MAX) if cp not in SURROGATES)


def emit(name, items, bits):
    """An array of uint32_t or uint64_t literals and its size."""
    per_line, fmt = (8, "0x{:08X},") if bits == 32 else (4, "0x{:016X}ull,")
    print(f"extern const uint{bits}_t {name}[] = {{")
    for i in range(0, len(items), per_line):
        print("    " + " ".join(fmt.format(x) for x in items[i:i + per_line]))
    print("};")
    print(f"extern const size_t {name}Size = {len(items)};\n")


def main():
    # Surrogates cannot occur (UTF-8 input); give them the flags of their neighbours' run.
    flag_runs = runs((cp, DROP if cp in SURROGATES else flags_of(cp)) for cp in range(MAX))
    assert flag_runs[0][0] == 0

    # Lowercase: single-code-point mappings as runs (first, count, stride, delta); U+03A3 is left
    # to the Final_Sigma rule; multi-code-point mappings listed apart.
    singles, specials = [], []
    for cp in code_points():
        if cp == 0x3A3:
            continue
        low = chr(cp).lower()
        if low == chr(cp):
            continue
        if len(low) == 1:
            singles.append((cp, ord(low) - cp))
        else:
            assert len(low) == 2, hex(cp)
            specials.append((cp, ord(low[0]), ord(low[1])))
    lower_runs = []  # [first, count, stride, delta]
    for cp, delta in singles:
        if lower_runs:
            r = lower_runs[-1]
            last = r[0] + (r[1] - 1) * r[2]
            if r[3] == delta and r[1] == 1 and cp - last in (1, 2):
                r[2] = cp - last
                r[1] = 2
                continue
            if r[3] == delta and r[1] > 1 and cp - last == r[2]:
                r[1] += 1
                continue
        lower_runs.append([cp, 1, 1, delta])
    for r in lower_runs:
        assert r[1] < (1 << 16) and -(1 << 23) <= r[3] < (1 << 23)

    ccc_runs = runs((cp, 0 if cp in SURROGATES else unicodedata.combining(chr(cp)))
                    for cp in range(MAX))

    # Canonical decompositions (one level; Hangul syllables are algorithmic) and the primary
    # composites: two-code-point decompositions whose character survives NFC.
    decomps, comps = [], []
    for cp in code_points():
        d = unicodedata.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        assert 1 <= len(parts) <= 2, hex(cp)
        first, second = parts[0], parts[1] if len(parts) == 2 else 0
        composable = len(parts) == 2 and unicodedata.normalize("NFC", chr(cp)) == chr(cp)
        decomps.append((cp << 43) | (first << 22) | (second << 1) | int(composable))
        if composable:
            comps.append((first << 42) | (second << 21) | cp)
    comps.sort()

    # Characters that IGNORECASE lets match an ASCII letter of the CLIP pattern's literals.
    folds = []
    for letter in sorted(set("startoftextendoftextsrevmld")):
        lit = regex.compile(regex.escape(letter), regex.IGNORECASE)
        for cp in code_points():
            if cp >= 0x80 and lit.fullmatch(chr(cp)):
                folds.append((cp << 8) | ord(letter))

    print("// Generated by agent/train/models/text/gen_unicode_tables.py from CPython "
          f"{sys.version.split()[0]}'s unicodedata")
    print(f"// (Unicode {unicodedata.unidata_version}) and regex {regex.__version__}. "
          "Do not edit; see unicode_tables.h.")
    print("// clang-format off")
    print('#include "agent/train/models/text/unicode_tables.h"\n')
    print("namespace gleaner::train::text::tables {\n")
    emit("kFlagRuns", [(cp << 8) | f for cp, f in flag_runs], 32)
    print("extern const LowerRun kLowerRuns[] = {")
    for i in range(0, len(lower_runs), 4):
        print("    " + " ".join("{0x%X, %d, %d, %d}," % tuple(r) for r in lower_runs[i:i + 4]))
    print("};")
    print(f"extern const size_t kLowerRunsSize = {len(lower_runs)};\n")
    emit("kLowerSpecial", [(a << 42) | (b << 21) | c for a, b, c in specials], 64)
    emit("kCombiningClassRuns", [(cp << 8) | v for cp, v in ccc_runs], 32)
    emit("kDecompositions", decomps, 64)
    emit("kCompositions", comps, 64)
    emit("kAsciiFolds", folds, 32)
    print("}  // namespace gleaner::train::text::tables")


if __name__ == "__main__":
    main()
