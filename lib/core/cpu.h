/* Kernels compiled for several x86-64 levels, one level chosen per process.
 *
 *     static TFM__KERNEL(name, (params), (args))
 *     {
 *         body
 *     }
 *
 * defines name(params) (static, or extern without the static) and compiles
 * its body three times: for x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and
 * the baseline every x86-64 runs. The body is always inlined into each, so
 * the static inline helpers it calls (tfm__expf, tfm__counter_bits) are
 * compiled for that level too. A call goes through a table indexed by
 * tfm__cpu_level(). Elsewhere (a -Dnative build, other architectures or
 * compilers) the body is compiled once, for the build's own target.
 *
 * Why not GCC's target_clones: its ifunc resolvers run while the dynamic
 * linker relocates the library, before libc has set up the environment,
 * so they cannot honour TFM_CPU. */
#ifndef TFM_CORE_CPU_H
#define TFM_CORE_CPU_H

/* The levels, worst first; tfm_cpu_path() names them. */
enum { TFM__CPU_BASELINE, TFM__CPU_X86_64_V3, TFM__CPU_X86_64_V4 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TFM_NATIVE)
#define TFM__CPU_DISPATCH 1

/* Chosen on first use: the best level the CPU (and its OS) supports, lowered
 * by TFM_CPU. Until then the value is -1. */
extern int tfm__cpu_chosen;
int tfm__cpu_choose(void);

static inline int tfm__cpu_level(void)
{
    int level = __atomic_load_n(&tfm__cpu_chosen, __ATOMIC_RELAXED);
    return level >= 0 ? level : tfm__cpu_choose();
}

/* For the helpers a kernel's body calls: inlined into each copy, so they
 * run at the copy's level (one left out of line would run the baseline). */
#define TFM__INLINE static inline __attribute__((always_inline))

#define TFM__KERNEL_AT(name, suffix, isa, params, args)                                    \
    __attribute__((target(isa))) static void name##__##suffix params                       \
    {                                                                                      \
        name##__body args;                                                                 \
    }

#define TFM__KERNEL(name, params, args)                                                    \
    void name params;                                                                      \
    static inline __attribute__((always_inline)) void name##__body params;                 \
    static void name##__baseline params                                                    \
    {                                                                                      \
        name##__body args;                                                                 \
    }                                                                                      \
    TFM__KERNEL_AT(name, x86_64_v3, "arch=x86-64-v3", params, args)                        \
    TFM__KERNEL_AT(name, x86_64_v4, "arch=x86-64-v4", params, args)                        \
    void name params                                                                       \
    {                                                                                      \
        static void (*const at_level[]) params = {name##__baseline, name##__x86_64_v3,     \
                                                  name##__x86_64_v4};                      \
        at_level[tfm__cpu_level()] args;                                                   \
    }                                                                                      \
    static inline __attribute__((always_inline)) void name##__body params

#else
#define TFM__CPU_DISPATCH 0
#define TFM__INLINE static inline
#define TFM__KERNEL(name, params, args) void name params
#endif

#endif
