/* The internal JSON reader on raw text (copied: it decodes strings in
 * place), with the largest value limit a text can need, then a walk over
 * every node as the readers walk them (strlen lets ASan check every string
 * ends inside its buffer, and that none holds a NUL), and no object with a
 * key twice. */
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
    for (int64_t i = 0; i < doc.count; i++) {
        const tfm__json_node *n = &doc.nodes[i];
        /* every string and key a C string: \u0000 is refused */
        if (tfm__json_key(&doc, n) && strlen(tfm__json_key(&doc, n)) != n->key_len)
            __builtin_trap();
        if (n->type == TFM__JSON_STRING && strlen(tfm__json_string(&doc, n)) != n->string_len)
            __builtin_trap();
        if (n->next <= i || n->next > doc.count)
            __builtin_trap(); /* a subtree must end after its node */
        /* no object names a key twice */
        for (uint32_t a = (uint32_t)i + 1; n->type == TFM__JSON_OBJECT && a < n->next;
             a = doc.nodes[a].next)
            for (uint32_t b = doc.nodes[a].next; b < n->next; b = doc.nodes[b].next)
                if (!strcmp(tfm__json_key(&doc, &doc.nodes[a]), tfm__json_key(&doc, &doc.nodes[b])))
                    __builtin_trap();
    }
    tfm__json_free(&doc);
    free(text);
    return 0;
}
