#!/bin/sh
# options.t - docs/rota-device-plugin.md's option table lists exactly the options rota-device-plugin --help
# shows (as tests/docs/options.t does for the other programs). Skipped where the plugin is not built (no grpc++).
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
KDP=$ROTA_BUILD/bin/rota-device-plugin
[ -x "$KDP" ] || { echo "1..0 # SKIP $KDP not built (no grpc++)"; exit 0; }
T=$(mktemp -d /tmp/rota-k8s-options-t.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$KDP" --help | sed -n 's/^  \(--[a-z-]*\).*/\1/p' | grep -v '^--help' | sort -u >"$T/help"
awk '$0 == "## Options" { on = 1; next } /^## / { on = 0 } on' "$ROTA_SRCDIR/docs/rota-device-plugin.md" |
    sed -n 's/^| `\([^` ]*\).*/\1/p' | sort -u >"$T/doc"
echo "1..2"
[ "$(wc -l <"$T/help")" -ge 10 ]; r=$?
echo "$([ $r = 0 ] && echo ok || echo not ok) 1 - --help lists the options ($(wc -l <"$T/help"))"
if diff "$T/help" "$T/doc" >"$T/diff"; then
    echo "ok 2 - the docs' option table matches --help"
else
    echo "not ok 2 - the docs' option table matches --help (< only in --help, > only in the docs)"
    sed 's/^/# /' "$T/diff"
fi
