/* The internal JSON reader on raw text (copied: it decodes strings in
 * place), with the largest value limit a text can need, then a walk over
 * every node as the readers walk them (strlen lets ASan check every string
 * ends inside its buffer). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    if (size)
        memcpy(text, data, size);
    tfm__json doc;
    if (tfm__json_parse("fuzz", text, size, (int64_t)(size / 2 + 1), &doc) != TFM_OK) {
        free(text);
        return 0;
    }
    static volatile size_t bytes;
    for (int64_t i = 0; i < doc.count; i++) {
        const tfm__json_node *n = &doc.nodes[i];
        if (tfm__json_key(&doc, n))
            bytes += strlen(tfm__json_key(&doc, n)) + n->key_len;
        if (n->type == TFM__JSON_STRING)
            bytes += strlen(tfm__json_string(&doc, n)) + n->string_len;
        if (n->next <= i || n->next > doc.count)
            __builtin_trap(); /* a subtree must end after its node */
    }
    tfm__json_free(&doc);
    free(text);
    return 0;
}
