#!/usr/bin/env bash
# Every Catch test name is one ctest case: ctest splits a name at ';' into two cases that both
# fail ("No test cases matched"), and the split shows only as two failures with odd names.
#   tests/test_names_check.sh TX_TESTS_BINARY
set -u
# Catch2 2.x exits with the number of names listed, so the count below is the check.
names=$("$1" --list-test-names-only)
[ "$(printf '%s\n' "$names" | grep -c .)" -gt 100 ] || { echo "expected the suite's test names from $1"; exit 1; }
bad=$(printf '%s\n' "$names" | grep -F ';')
if [ -n "$bad" ]; then
  echo "test names holding ';' (ctest splits them; use ',' or ':'):"
  printf '%s\n' "$bad"
  exit 1
fi
echo "$(printf '%s\n' "$names" | grep -c .) test names, none holding ';'"
