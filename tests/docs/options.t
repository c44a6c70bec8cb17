#!/bin/sh
# options.t - the option tables in docs/ list exactly the options the code takes, no more and no fewer.
#
# Sources of truth: shim/options.c's table (ROTA_*), tools/simcuda/config.c's table (SIMCUDA_*), the
# directives runtime/config.c parses, and the synopsis and option lines of each program's --help (rotad, rota
# and its commands, simcuda-stat, workload). A doc table row is a line `| `NAME ...` | ...`; its first word is
# the name. Rows are read from one `## ` section of the page. --help is left out on both sides.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
S=$ROTA_SRCDIR
D=${ROTA_DOCS:-$S/docs}
B=$ROTA_BUILD/bin
T=$(mktemp -d /tmp/rota-docs-options-t.XXXXXX)
trap 'rm -rf "$T"' EXIT
for f in "$B/rotad" "$B/rota" "$B/simcuda-stat" "$B/workload" "$S/shim/options.c" "$S/tools/simcuda/config.c"; do
    [ -e "$f" ] || { echo "Bail out! $f is missing"; exit 255; }
done
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }

# rows FILE [SECTION]: the names in the first column of FILE's tables (of its "## SECTION" only, if given).
rows() {
    if [ $# -gt 1 ]; then
        awk -v h="## $2" '$0 == h { on = 1; next } /^## / { on = 0 } on' "$1"
    else
        cat "$1"
    fi | sed -n 's/^| `\([^` ]*\).*/\1/p' | grep -v '^--help$' | sort -u
}
# help_opts CMD...: the --options of CMD's --help: its synopsis (up to the first blank line) and the lines that
# describe an option ("  --name ..."). Prose elsewhere may name another program's options.
help_opts() {
    "$@" --help 2>&1 | awk 'NF == 0 { syn = 1 } !syn || /^  +--[a-z]/' | grep -o -- '--[a-z][a-z-]*' |
        grep -v '^--help$' | sort -u
}
# same WHAT CODE-LIST DOC-LIST: one test; a diagnostic line for each name on one side only.
same() {
    if [ ! -s "$2" ]; then
        ok 1 "$1: found no names in the code (the extraction is broken)"
        return
    fi
    comm -23 "$2" "$3" | sed 's/^/# in the code, not in the docs: /'
    comm -13 "$2" "$3" | sed 's/^/# in the docs, not in the code: /'
    cmp -s "$2" "$3"
    ok $? "$1"
}

grep -o '{"ROTA_[A-Z_]*"' "$S/shim/options.c" | tr -d '{"' | sort -u > "$T/rota-env"
grep -o '"SIMCUDA_[A-Z_]*"' "$S/tools/simcuda/config.c" | tr -d '"' | sort -u > "$T/simcuda-env"
{ # directives compared by name, and the rows of config.c's table of numbers (config_nums)
    sed -n 's/.*strcmp(word\[0\], "\([a-z-]*\)").*/\1/p' "$S/runtime/config.c"
    sed -n 's/^ *{"\([a-z-]*\)", offsetof(config_t.*/\1/p' "$S/runtime/config.c"
} | sort -u > "$T/rotad-conf"
help_opts "$B/rotad" > "$T/rotad"
help_opts "$B/rota" > "$T/rota"
help_opts "$B/rota" run > "$T/run"
help_opts "$B/rota" top > "$T/top"
help_opts "$B/rota" status > "$T/status"
help_opts "$B/simcuda-stat" > "$T/simcuda-stat"
help_opts "$B/workload" > "$T/workload"

check_all() { # DOCS-DIR
    rows "$1/librota.md" "Environment" > "$T/d-rota-env"
    rows "$1/simcuda.md" "Environment" > "$T/d-simcuda-env"
    rows "$1/rotad.md" "Options" > "$T/d-rotad"
    rows "$1/rotad.md" "Config file" > "$T/d-rotad-conf"
    rows "$1/rota.md" "Options" > "$T/d-rota"
    rows "$1/rota.md" "rota run" > "$T/d-run"
    rows "$1/rota.md" "rota top" > "$T/d-top"
    rows "$1/rota.md" "rota status" > "$T/d-status"
    rows "$1/simcuda.md" "simcuda-stat" > "$T/d-simcuda-stat"
    rows "$1/workload.md" "Options" > "$T/d-workload"
    same "librota.md lists every ROTA_* option of shim/options.c" "$T/rota-env" "$T/d-rota-env"
    same "simcuda.md lists every SIMCUDA_* knob of tools/simcuda/config.c" "$T/simcuda-env" "$T/d-simcuda-env"
    same "rotad.md lists every option of rotad --help" "$T/rotad" "$T/d-rotad"
    same "rotad.md lists every config file directive of runtime/config.c" "$T/rotad-conf" "$T/d-rotad-conf"
    same "rota.md lists every option of rota --help" "$T/rota" "$T/d-rota"
    same "rota.md lists every option of rota run --help" "$T/run" "$T/d-run"
    same "rota.md lists every option of rota top --help" "$T/top" "$T/d-top"
    same "rota.md lists every option of rota status --help" "$T/status" "$T/d-status"
    same "simcuda.md lists every option of simcuda-stat --help" "$T/simcuda-stat" "$T/d-simcuda-stat"
    same "workload.md lists every option of workload --help" "$T/workload" "$T/d-workload"
}

echo "1..13"
check_all "$D"

# The check itself: a page with a row taken out, or a row added, fails it.
mkdir "$T/docs"
cp "$D"/*.md "$T/docs/"
grep -v '^| `ROTA_MEM_WAIT`' "$D/librota.md" > "$T/docs/librota.md"
rows "$T/docs/librota.md" "Environment" > "$T/d-rota-env"
! cmp -s "$T/rota-env" "$T/d-rota-env"
ok $? "the check notices an option missing from librota.md"
sed 's/^| `--quiet`/| `--loud`/' "$D/rota.md" > "$T/docs/rota.md"
rows "$T/docs/rota.md" "rota run" > "$T/d-run"
! cmp -s "$T/run" "$T/d-run"
ok $? "the check notices an option in rota.md that rota run does not take"
printf '#!/bin/sh\ncat <<EOF\nusage: rotad [--socket PATH] [--frobnicate]\n\n  --socket PATH  x\n  --config FILE  y\nEOF\n' \
    > "$T/fake-rotad"
chmod +x "$T/fake-rotad"
[ "$(help_opts "$T/fake-rotad" | tr '\n' ' ')" = "--config --frobnicate --socket " ]
ok $? "options are read from the synopsis and the option lines of --help"
