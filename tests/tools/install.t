#!/bin/sh
# install.t - make install into a DESTDIR of the test's own: the user's programs in bin, librota.so in lib,
# simcuda in lib/rota, the tools in libexec/rota; they run from there without LD_LIBRARY_PATH; make uninstall
# removes all of it.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
T=$(mktemp -d /tmp/rota-install-t.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
D=$T/root
P=/opt/rota-t
unset LD_LIBRARY_PATH MAKEFLAGS MAKELEVEL MFLAGS

make -s -C "$ROTA_SRCDIR" B="$ROTA_BUILD" SANITIZER="${ROTA_SANITIZER:-}" DESTDIR="$D" PREFIX=$P install >"$T/log" 2>&1; ok $? "make install"
[ "$(ls "$D$P/bin" | tr '\n' ' ')" = "rota rotad " ]; ok $? "bin holds the user's programs only: $(ls "$D$P/bin" | tr '\n' ' ')"
[ -f "$D$P/lib/librota.so" ]; ok $? "librota.so in lib"
[ -f "$D$P/lib/rota/libcuda.so.1" ] && [ ! -e "$D$P/lib/libcuda.so.1" ]; ok $? "simcuda in lib/rota, not on the search path"
[ -x "$D$P/libexec/rota/workload" ] && [ -x "$D$P/libexec/rota/simcuda-stat" ]; ok $? "the tools in libexec/rota"
"$D$P/bin/rota" --version | grep -q '^rota [0-9]'; ok $? "the installed rota runs: $("$D$P/bin/rota" --version)"
"$D$P/bin/rotad" --version | grep -q '^rotad [0-9]'; ok $? "the installed rotad runs"
if ldconfig -p 2>/dev/null | grep -qF 'libcuda.so.1 ' || ! readelf -d "$ROTA_BUILD/bin/workload" 2>/dev/null | grep -q RUNPATH; then
    n=$((n + 1)); echo "ok $n # skip a CUDA driver is installed here: the tools use it, with no RUNPATH"
else
    "$D$P/libexec/rota/workload" --help >/dev/null 2>&1; ok $? "the installed workload finds simcuda in lib/rota without LD_LIBRARY_PATH"
fi
make -s -C "$ROTA_SRCDIR" B="$ROTA_BUILD" SANITIZER="${ROTA_SANITIZER:-}" DESTDIR="$D" PREFIX=$P uninstall >"$T/log" 2>&1; ok $? "make uninstall"
left=$(find "$D" ! -type d)
[ -z "$left" ]; ok $? "uninstall leaves no file behind${left:+: $left}"
echo "1..$n"
