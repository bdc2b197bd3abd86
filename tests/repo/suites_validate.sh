#!/bin/sh
# suites_validate.sh — every shipped suite (suites/*.yaml) loads: `dlhost validate` and
# `dlhost run --dry-run` exit 0, agree on the number of cases and on how many are skipped here,
# give each case a distinct id, and leave at least one case runnable on this machine. A broken
# copy of a suite must fail validation, so the check itself is shown to bite.
# Usage: suites_validate.sh DLHOST SOURCE_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; WORK="$3"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "suites_validate: FAILED: $*"; exit 1; }

n_suites=0
for suite in "$SRC"/suites/*.yaml; do
  name=$(basename "$suite" .yaml)
  "$DLHOST" validate "$suite" > "$WORK/$name.validate" 2>&1 ||
    { cat "$WORK/$name.validate"; fail "dlhost validate $suite"; }
  "$DLHOST" run "$suite" --dry-run > "$WORK/$name.dry" 2>&1 ||
    { cat "$WORK/$name.dry"; fail "dlhost run $suite --dry-run"; }
  # "<path>: valid, N cases (K skipped here)"
  line=$(tail -n 1 "$WORK/$name.validate")
  cases=$(echo "$line" | sed -n 's/.*: valid, \([0-9]*\) cases (\([0-9]*\) skipped here)$/\1/p')
  skipped=$(echo "$line" | sed -n 's/.*: valid, \([0-9]*\) cases (\([0-9]*\) skipped here)$/\2/p')
  [ -n "$cases" ] || fail "$name: unexpected validate output: $line"
  dry_cases=$(tail -n 1 "$WORK/$name.dry" | sed -n 's/^\([0-9]*\) cases$/\1/p')
  dry_skipped=$(grep -c '^    SKIPPED: ' "$WORK/$name.dry" || true)
  ids=$(grep -v '^    ' "$WORK/$name.dry" | sed '$d')
  distinct=$(echo "$ids" | sort -u | grep -c . || true)
  [ "$cases" -ge 1 ] && [ "$cases" -le 5000 ] || fail "$name: $cases cases is not a sane count"
  [ "$dry_cases" = "$cases" ] || fail "$name: validate says $cases cases, --dry-run $dry_cases"
  [ "$dry_skipped" = "$skipped" ] || fail "$name: validate skips $skipped, --dry-run $dry_skipped"
  [ "$distinct" = "$cases" ] || fail "$name: $distinct distinct case ids for $cases cases"
  [ "$skipped" -lt "$cases" ] || fail "$name: every case is skipped here"
  echo "$name: $cases cases, $skipped skipped here"
  n_suites=$((n_suites + 1))
done
[ "$n_suites" -ge 1 ] || fail "no suites in $SRC/suites"

# The check bites: an unknown key in a shipped suite is refused with a non-zero exit.
first=$(ls "$SRC"/suites/*.yaml | head -n 1)
{ cat "$first"; echo "no_such_key: 1"; } > "$WORK/broken.yaml"
if "$DLHOST" validate "$WORK/broken.yaml" > "$WORK/broken.out" 2>&1; then
  cat "$WORK/broken.out"; fail "a suite with an unknown key validated"
fi
echo "suites_validate: $n_suites suites valid"
