/* fuzz-proto.c - libFuzzer harness: rotad's message check (proto_check) and the shared-object header checks. */
#include "runtime/abi.h"
#include "runtime/lib/proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* As rotad receives it: at most ROTA_MSG_MAX bytes in a buffer of that size. */
    char buf[ROTA_MSG_MAX];
    size_t n = size < sizeof buf ? size : sizeof buf;
    memcpy(buf, data, n);
    uint32_t abi = 0;
    const char *why = NULL;
    int type = proto_check(buf, n, &abi, &why);
    if (type < 0 && !why) abort(); /* every refusal says why */
    if (type > 0 && (type > ROTA_MSG_TYPE_MAX || n < sizeof(rota_msg_hdr_t))) abort();
    /* A mapped object's header, from a copy the size of the mapping. */
    static uint8_t map[ROTA_CHANNEL_MAP_SIZE];
    memset(map, 0, sizeof map);
    memcpy(map, data, size < sizeof map ? size : sizeof map);
    proto_channel_check(map, sizeof map, &why);
    proto_board_check(map, sizeof map, &why);
    return 0;
}
