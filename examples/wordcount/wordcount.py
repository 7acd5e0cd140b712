#!/usr/bin/env python3
"""The word count of examples/wordcount as an exec stage, in Python.

Batchwork runs it the Hadoop Streaming way: the task's input records on
stdin, its output on stdout, its log on stderr.

    wordcount.py map     reads text lines and writes one "word<TAB>count"
                         line per distinct word of its split (a combiner);
                         the stage's shuffle routes each line by its word.
    wordcount.py reduce  reads "word<TAB>count" lines and writes the sums,
                         "word<TAB>count" sorted by word.

A word is a maximal run of Unicode letters, lowercased, exactly as
wordcount.Words in Go: each character is lowercased on its own with its
simple mapping (Go's unicode.ToLower), and a letter is a character of
category L (Go's unicode.IsLetter). Standard library only.

A spec using it (the program is looked up in the executor's programs
directory, BATCHWORK_EXEC_DIR):

    stages:
      - name: map
        exec: [wordcount.py, map]
        partitions: {input: {prefix: "inputs:corpus/"}}
        shuffle: {partitions: 4}
      - name: reduce
        exec: [wordcount.py, reduce]
        after: [map]
"""

import sys


def _lower(c):
    # str.lower() uses full case mappings: "İ" becomes "i" and a combining
    # dot, and a final "Σ" becomes "ς". Go maps one rune to one rune, so
    # keep the first character of the mapping, character by character.
    low = c.lower()
    return low[0] if low else c


def words(line):
    """The words of line: maximal runs of letters, lowercased."""
    out, cur = [], []
    for c in line:
        c = _lower(c)
        if c.isalpha():
            cur.append(c)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def _lines(stream):
    # Bytes in, decoded here: invalid UTF-8 becomes U+FFFD (not a letter),
    # as Go reads it, whatever the locale.
    for raw in stream:
        yield raw.decode("utf-8", errors="replace")


def do_map(stdin, stdout):
    counts = {}
    for line in _lines(stdin):
        for w in words(line):
            counts[w] = counts.get(w, 0) + 1
    for w, n in counts.items():
        stdout.write(("%s\t%d\n" % (w, n)).encode("utf-8"))


def do_reduce(stdin, stdout):
    counts = {}
    for n, line in enumerate(_lines(stdin), 1):
        line = line.rstrip("\n")
        if not line:
            continue
        word, sep, count = line.partition("\t")
        if not sep:
            raise SystemExit("reduce: input line %d has no tab" % n)
        try:
            counts[word] = counts.get(word, 0) + int(count)
        except ValueError:
            raise SystemExit("reduce: count of %r on line %d is not a number" % (word, n))
    # Code point order is UTF-8 byte order, Go's string order.
    for w in sorted(counts):
        stdout.write(("%s\t%d\n" % (w, counts[w])).encode("utf-8"))


def main(argv):
    if len(argv) != 2 or argv[1] not in ("map", "reduce"):
        sys.stderr.write("usage: wordcount.py map|reduce\n")
        return 2
    step = do_map if argv[1] == "map" else do_reduce
    step(sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
