/* preload-t.c - TAP tests for preload_compose (runtime/lib/preload.c): librota once, after sanitizer runtimes. */
#include "runtime/lib/preload.h"
#include "tests/tap/tap.h"

#include <errno.h>

int main(void)
{
    char out[256];
    is_int(preload_compose("/r/librota.so", NULL, out, sizeof out), 0, "no LD_PRELOAD before");
    is_str(out, "/r/librota.so", "librota alone");
    preload_compose("/r/librota.so", "/a/b.so /x/libasan.so.8", out, sizeof out);
    is_str(out, "/x/libasan.so.8:/r/librota.so:/a/b.so", "a sanitizer runtime stays first, the rest after librota");
    preload_compose("/r/librota.so", "/old/librota.so:/a/b.so:/r/librota.so", out, sizeof out);
    is_str(out, "/r/librota.so:/a/b.so", "librota already there (a nested step): dropped, preloaded once");
    preload_compose(NULL, "/old/librota.so:libclang_rt.asan-x86_64.so::/a/b.so", out, sizeof out);
    is_str(out, "libclang_rt.asan-x86_64.so:/a/b.so", "no librota (rota off): every librota entry dropped");
    preload_compose("/r/librota.so", "/a/librota.so.bak /a/xlibrota.so", out, sizeof out);
    is_str(out, "/r/librota.so:/a/librota.so.bak:/a/xlibrota.so", "only the file name librota.so counts");
    char small[16];
    is_int(preload_compose("/r/librota.so", "/a/b.so", small, sizeof small), -ENAMETOOLONG, "too long: -ENAMETOOLONG");
    is_int(preload_compose("/r/librota.so", NULL, out, 0), -ENAMETOOLONG, "no room at all");
    return done_testing();
}
