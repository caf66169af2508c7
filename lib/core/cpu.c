#include "core/cpu.h"

#include <stdlib.h>
#include <string.h>

#include "tfm/common.h"

#if TFM__CPU_DISPATCH
static const char *const level_names[] = {"baseline", "x86-64-v3", "x86-64-v4"};

int tfm__cpu_chosen = -1;

/* Called from normal code (never from an ifunc resolver), so the
 * environment is there to read. Threads racing here store the same value. */
int tfm__cpu_choose(void)
{
    __builtin_cpu_init();
    int best = __builtin_cpu_supports("x86-64-v4")   ? TFM__CPU_X86_64_V4
               : __builtin_cpu_supports("x86-64-v3") ? TFM__CPU_X86_64_V3
                                                     : TFM__CPU_BASELINE;
    int level = best;
    const char *wanted = getenv("TFM_CPU");
    if (wanted && *wanted) {
        level = TFM__CPU_BASELINE; /* what an unknown name gets */
        for (int i = 0; i <= TFM__CPU_X86_64_V4; i++)
            if (strcmp(wanted, level_names[i]) == 0)
                level = i < best ? i : best;
    }
    __atomic_store_n(&tfm__cpu_chosen, level, __ATOMIC_RELAXED);
    return level;
}

const char *tfm_cpu_path(void)
{
    return level_names[tfm__cpu_level()];
}
#else
const char *tfm_cpu_path(void)
{
#ifdef TFM_NATIVE
    return "native";
#else
    return "baseline";
#endif
}
#endif
