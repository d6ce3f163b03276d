#!/usr/bin/env python3
"""Writes the numbers task: lists of numbers in English words -> the same in German words.

    make_data.py OUT_DIR [--train N] [--valid N] [--test N] [--max 9999] [--seed 1]

German writes a number below a million as one word with its units before its tens
("twenty-one" -> "einundzwanzig", "three thousand four hundred twenty-one" ->
"dreitausendvierhunderteinundzwanzig"), so the model has to reorder, not copy word by word.
A line lists one to three numbers ("three, twenty-one and four hundred" -> "drei,
einundzwanzig und vierhundert"). Every seventh number from 100 up (n % 7 == 3) never appears in
training: validation and test lines use only those, so the test measures generalisation to
numbers never seen (the words below 100 are all seen: a model cannot guess "drei" for
"three" without ever meeting it). Writes train.en/.de, valid.en/.de, test.en/.de.
"""
import argparse
import os
import random

EN_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
            "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
            "seventeen", "eighteen", "nineteen"]
EN_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
DE_UNITS = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun",
            "zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn",
            "achtzehn", "neunzehn"]
DE_TENS = ["", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig",
           "neunzig"]


def english(n):
    """American style, no 'and': 3421 -> 'three thousand four hundred twenty-one'."""
    if n < 20:
        return EN_UNITS[n]
    if n < 100:
        return EN_TENS[n // 10] + ("-" + EN_UNITS[n % 10] if n % 10 else "")
    if n < 1000:
        rest = " " + english(n % 100) if n % 100 else ""
        return EN_UNITS[n // 100] + " hundred" + rest
    rest = " " + english(n % 1000) if n % 1000 else ""
    return english(n // 1000) + " thousand" + rest


def german(n, alone=True):
    """One word; 'eins' only at the end of a number, 'ein' before 'und', 'hundert', 'tausend'."""
    if n == 1:
        return "eins" if alone else "ein"
    if n < 20:
        return DE_UNITS[n]
    if n < 100:
        unit = n % 10
        return (german(unit, False) + "und" if unit else "") + DE_TENS[n // 10]
    if n < 1000:
        rest = german(n % 100) if n % 100 else ""
        return german(n // 100, False) + "hundert" + rest
    rest = german(n % 1000) if n % 1000 else ""
    return german(n // 1000, False) + "tausend" + rest


def join(items, conjunction):
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " " + conjunction + " " + items[-1]


def sample(rng, pool):
    # Uniform over the number of digits first, so "seven" is as common as "seven thousand".
    while True:
        digits = rng.randint(1, len(str(max(pool))))
        lo, hi = (0 if digits == 1 else 10 ** (digits - 1)), 10 ** digits - 1
        n = rng.randint(lo, min(hi, max(pool)))
        if n in pool:
            return n


def write(path_prefix, lines):
    with open(path_prefix + ".en", "w", encoding="utf-8") as en, \
         open(path_prefix + ".de", "w", encoding="utf-8") as de:
        for numbers in lines:
            en.write(join([english(n) for n in numbers], "and") + "\n")
            de.write(join([german(n) for n in numbers], "und") + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--train", type=int, default=100000)
    p.add_argument("--valid", type=int, default=200)
    p.add_argument("--test", type=int, default=200)
    p.add_argument("--max", type=int, default=9999)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    held_out = {n for n in range(100, a.max + 1) if n % 7 == 3}
    seen = set(range(a.max + 1)) - held_out

    def lines(count, pool):
        return [[sample(rng, pool) for _ in range(rng.randint(1, 3))] for _ in range(count)]

    os.makedirs(a.out_dir, exist_ok=True)
    write(os.path.join(a.out_dir, "train"), lines(a.train, seen))
    write(os.path.join(a.out_dir, "valid"), lines(a.valid, held_out))
    write(os.path.join(a.out_dir, "test"), lines(a.test, held_out))


if __name__ == "__main__":
    main()
