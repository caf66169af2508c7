#include "core/thread_buffer.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_key_t buffer_key;
static pthread_once_t buffer_once = PTHREAD_ONCE_INIT;
static int buffer_key_made;

typedef struct grown {
    void *data;
    size_t bytes;
} grown;

static void free_grown(void *p)
{
    grown *g = p;
    if (g) {
        free(g->data);
        free(g);
    }
}

static void make_key(void)
{
    buffer_key_made = pthread_key_create(&buffer_key, free_grown) == 0;
}

void *tfm__thread_buffer(size_t bytes)
{
    pthread_once(&buffer_once, make_key);
    if (!buffer_key_made)
        return NULL;
    grown *g = pthread_getspecific(buffer_key);
    if (!g) {
        g = calloc(1, sizeof *g);
        if (!g || pthread_setspecific(buffer_key, g) != 0) {
            free(g);
            return NULL;
        }
    }
    if (g->bytes < bytes) {
        void *data = NULL;
        if (posix_memalign(&data, 64, bytes) != 0)
            return NULL;
        free(g->data);
        g->data = data;
        g->bytes = bytes;
    }
    return g->data;
}

void tfm__thread_buffer_release(void)
{
    if (buffer_key_made) {
        free_grown(pthread_getspecific(buffer_key));
        buffer_key_made = 0; /* a kernel asking after this gets NULL */
        pthread_key_delete(buffer_key);
    }
}
