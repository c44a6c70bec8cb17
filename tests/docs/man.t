#!/bin/sh
# man.t - the manual pages (man/, generated from docs/ by scripts/man): rota(1), rotad(8), librota(7) and
# simcuda(7) exist, man -l renders each with its NAME section and no error, and they match what scripts/man makes
# of today's docs/ (so a docs/ edit without make man fails here). Each check is skipped with its reason where man
# or pandoc is missing.
set -u
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
T=$(mktemp -d "${TMPDIR:-/tmp}/rota-man-t.XXXXXX")
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
skip() { n=$((n + 1)); echo "ok $n # skip $1"; }

for page in rota.1 rotad.8 librota.7 simcuda.7; do
    f=$ROTA_SRCDIR/man/$page
    [ -f "$f" ]; ok $? "man/$page exists"
    if ! command -v man >/dev/null; then
        skip "man/$page renders: no man here (Debian: man-db)"
        continue
    fi
    MANWIDTH=100 man -l "$f" >"$T/out" 2>"$T/err"
    rc=$?
    name=${page%.*}
    [ $rc = 0 ] && grep -q "^NAME" "$T/out" && grep -q "^ *$name  *- " "$T/out" && grep -q "^SYNOPSIS" "$T/out" &&
        ! grep -qi "error" "$T/err"
    ok $? "man -l man/$page renders NAME ($name - ...) and SYNOPSIS (status $rc$(head -c 200 "$T/err" | tr '\n' ' '))"
done
if command -v pandoc >/dev/null; then
    "$ROTA_SRCDIR/scripts/man" "$T/gen" >"$T/log" 2>&1
    d=$(cd "$T/gen" 2>/dev/null && for p in *; do cmp -s "$p" "$ROTA_SRCDIR/man/$p" || echo "$p"; done)
    [ -z "$d" ] && [ "$(ls "$T/gen" | wc -l)" = "$(ls "$ROTA_SRCDIR/man" | wc -l)" ]
    ok $? "man/ is what scripts/man makes of docs/ (run make man)${d:+: differs: $d}"
else
    skip "man/ matches docs/: no pandoc here (Debian: pandoc)"
fi
echo "1..$n"
