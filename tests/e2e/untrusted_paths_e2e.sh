#!/bin/sh
# untrusted_paths_e2e.sh — issue 43's probes of what other users can put in dlhost's way,
# through the real executable:
#  1. output paths in a sticky world-writable folder (made here, mode 1777): a link another user
#     planted as the results file of `run -o`, the CSV of `export -o`, the folder of `report -o`
#     is refused, naming it, and its target is left as it was (as root only: planting a link as
#     another user needs lchown; skipped with the reason otherwise);
#  2. a plugin in a folder anyone can write is refused before it is loaded (the fixture marks a
#     file from its library constructor), with the reason listed by `dlhost plugins`, and loads
#     with --allow-unsafe-plugin-paths;
#  3. `new-backend` loads no plugin, refuses C++ keywords and the names of dlhost's own plugins
#     (every plugin and left-out note this build wrote), prints a --dir the shell cannot run as
#     commands, and says a --dir that is a file is not a folder.
# Usage: untrusted_paths_e2e.sh DLHOST SOURCE_DIR BINARY_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; BIN="$3"; WORK="$4"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "untrusted_paths_e2e: FAILED: $*"; exit 1; }
. "$(dirname "$0")/expect.sh"  # run NAME CMD..., expect_rc, expect_err, expect_out
RESULTS="$SRC/tests/host/report/data/results.jsonl"
MARK_SO="$BIN/tests/fixture_load_mark/libfixture_load_mark.so"
export DLHOST_TEST_LOAD_MARK="$WORK/loaded.mark"

# --- 1. planted links in a shared folder ---
if [ "$(id -u)" -eq 0 ]; then
  SHARED="$WORK/shared"; PRIVATE="$WORK/private"
  mkdir -p "$SHARED" "$PRIVATE/their-report"; chmod 1777 "$SHARED"; chmod 700 "$PRIVATE"
  printf 'root only' > "$PRIVATE/secret"  # no newline: the torn-line repair would add one
  printf 'the other report\n' > "$PRIVATE/their-report/report.md"
  ln -s "$PRIVATE/secret" "$SHARED/run.jsonl"; chown -h 65534:65534 "$SHARED/run.jsonl"
  ln -s "$PRIVATE/secret" "$SHARED/cases.csv"; chown -h 65534:65534 "$SHARED/cases.csv"
  ln -s "$PRIVATE/their-report" "$SHARED/rep2"; chown -h 65534:65534 "$SHARED/rep2"
  printf '%s\n' 'name: one' 'defaults: {network: lenet, backend: cpu_reference, batch: 4, warmup: 0, iterations: 2, threads: 1}' \
    'cases:' '  - {seed: 1}' > "$WORK/one.yaml"
  run run_link run "$WORK/one.yaml" -o "$SHARED/run.jsonl"
  expect_rc 2; expect_err "results file $SHARED/run.jsonl: refused: a symbolic link owned by uid 65534"
  run export_link export "$RESULTS" --csv -o "$SHARED/cases.csv"
  expect_rc 2; expect_err "$SHARED/cases.csv: refused"
  run report_link report "$RESULTS" --no-plots -o "$SHARED/rep2"
  expect_rc 2; expect_err "$SHARED/rep2: refused"
  test "$(cat "$PRIVATE/secret")" = "root only" || fail "a planted link's target was written"
  test "$(cat "$PRIVATE/their-report/report.md")" = "the other report" \
    || fail "report -o wrote through a planted folder link"
  # A link of one's own is followed, as before.
  ln -s "$PRIVATE/mine.csv" "$SHARED/mine.csv"
  run export_own export "$RESULTS" --csv -o "$SHARED/mine.csv"
  expect_rc 0
  head -1 "$PRIVATE/mine.csv" | grep -q '^case_id,' || fail "export did not follow the user's own link"
else
  echo "untrusted_paths_e2e: part 1 skipped: planting a link as another user needs root (lchown)"
fi

# --- 2. a plugin in a folder anyone can write ---
mkdir -p "$WORK/anyone"; cp "$MARK_SO" "$WORK/anyone/"; chmod 777 "$WORK/anyone"
run plugins_ww plugins --plugin-path "$WORK/anyone"
expect_out "refused $WORK/anyone/libfixture_load_mark.so"
expect_out "its folder $WORK/anyone is world-writable (mode 0777)"
test ! -e "$DLHOST_TEST_LOAD_MARK" || fail "dlhost plugins ran the code of a plugin anyone could write"
run plugins_allowed plugins --plugin-path "$WORK/anyone" --allow-unsafe-plugin-paths
test -e "$DLHOST_TEST_LOAD_MARK" || fail "--allow-unsafe-plugin-paths did not load the plugin"
rm -f "$DLHOST_TEST_LOAD_MARK"

# --- 3. new-backend ---
# Loads nothing: the marking plugin sits in a folder it would load from (a trusted one).
run nb_loads new-backend acme --dir "$WORK/acme" --plugin-path "$(dirname "$MARK_SO")"
expect_rc 0
test ! -e "$DLHOST_TEST_LOAD_MARK" || fail "new-backend loaded a plugin"
run nb_int new-backend int --dir "$WORK/int"
expect_rc 2; expect_err "'int' cannot name a backend: it is a C++ keyword"
test ! -e "$WORK/int" || fail "new-backend int wrote files"
run nb_reserved new-backend a__b --dir "$WORK/a__b"
expect_rc 2; expect_err "double underscore"
# Every plugin this build made or left out is refused by dlhost's own list of its plugins.
for f in "$BIN"/plugins/libdlhost_*.so "$BIN"/plugins/*.left-out; do
  test -e "$f" || continue
  plugin=$(basename "$f" .so); plugin=$(basename "$plugin" .left-out); plugin=${plugin#libdlhost_}
  run nb_builtin new-backend "$plugin" --dir "$WORK/builtin"
  expect_rc 2; expect_err "'$plugin' is the name of a plugin that comes with dlhost"
done
# A vendor's plugin already in a searched folder is refused too.
mkdir -p "$WORK/vendor"; cp "$BIN/plugins/libdlhost_cpu_reference.so" "$WORK/vendor/libdlhost_acme_v2.so"
run nb_taken new-backend acme_v2 --dir "$WORK/acme_v2" --plugin-path "$WORK/vendor"
expect_rc 2; expect_err "'acme_v2' is the name of a plugin already in dlhost's plugin folders"
# A --dir with shell syntax in it is printed as one quoted word: running the printed build
# command (cmake stubbed out) runs nothing else.
odd="$WORK/x y/\$(touch PWNED)"
run nb_quote new-backend quoted --dir "$odd"
expect_rc 0
test -f "$odd/CMakeLists.txt" || fail "new-backend did not write into '$odd'"
line=$(sed -n 's/^build: *//p' "$WORK/nb_quote.out" | sed 's/<dlhost SDK prefix>/PREFIX/')
test -n "$line" || fail "no build line"
(cd "$WORK" && ODD="$odd" sh -c 'cmake() { test "$2" = "$ODD" || test "$2" = "$ODD/build" || exit 3; }; '"$line") \
  || fail "the printed build command does not name '$odd' as one word: $line"
test ! -e "$WORK/PWNED" || fail "the printed build command runs the shell syntax in --dir: $line"
conform_line=$(sed -n 's/^conform: *//p' "$WORK/nb_quote.out")
echo "$conform_line" | grep -qF "'$odd/build/libdlhost_quoted.so'" || fail "conform line: $conform_line"
# A --dir that is a file.
: > "$WORK/a_file"
run nb_file new-backend filed --dir "$WORK/a_file"
expect_rc 2; expect_err "$WORK/a_file is not a folder"

echo "untrusted_paths_e2e: passed"
