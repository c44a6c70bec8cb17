#!/bin/sh
# install.t - make install into a DESTDIR of the test's own, without the CUDA toolkit (CUDA_HOME names nothing):
# the user's programs in bin, librota.so in lib, simcuda in lib/rota, the tools in libexec/rota (reached as rota
# workload and rota sim-stat), the manual pages in share/man; they run from there without LD_LIBRARY_PATH;
# make install-slurm adds the SPANK plugin where it is built; make uninstall removes all of it, directories too.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
T=$(mktemp -d /tmp/rota-install-t.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; return 1; fi; }
D=$T/root
P=/opt/rota-t
unset LD_LIBRARY_PATH MAKEFLAGS MAKELEVEL MFLAGS

mk() { make -s -C "$ROTA_SRCDIR" B="$ROTA_BUILD" SANITIZER="${ROTA_SANITIZER:-}" CUDA_HOME="$T/no-cuda" DESTDIR="$D" PREFIX=$P "$@"; }
mk install >"$T/log" 2>&1; ok $? "make install, with no toolkit at CUDA_HOME" || sed 's/^/# /' "$T/log"
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
for m in man1/rota.1 man8/rotad.8 man7/librota.7; do
    [ -f "$D$P/share/man/$m" ]; ok $? "the manual page share/man/$m"
done
"$D$P/bin/rota" workload --help 2>&1 | grep -q '^usage: workload'; ok $? "rota workload runs the installed libexec/rota/workload"
"$D$P/bin/rota" sim-stat --help 2>&1 | grep -q '^usage: simcuda-stat'; ok $? "rota sim-stat runs the installed simcuda-stat"
if [ -f "$ROTA_BUILD/lib/rota-spank.so" ]; then
    mk install-slurm >"$T/log" 2>&1 && [ -f "$D$P/lib/slurm/rota-spank.so" ]; ok $? "make install-slurm: lib/slurm/rota-spank.so"
else
    n=$((n + 1)); echo "ok $n # skip the SPANK plugin is not built (no slurm/spank.h)"
fi
mk uninstall >"$T/log" 2>&1; ok $? "make uninstall"
left=$(find "$D" ! -type d)
[ -z "$left" ]; ok $? "uninstall leaves no file behind${left:+: $left}"
left=$(find "$D$P" -type d 2>/dev/null)
[ -z "$left" ]; ok $? "nor an empty directory it made${left:+: $left}"
echo "1..$n"
