#!/usr/bin/env python3
"""The portable library's instruction sets, from its disassembly.

  check_isa.py LIBRARY [--vectorised]

Everything but the kernels' x86-64-v3 and x86-64-v4 copies (lib/core/cpu.h),
the bfloat16 products' AVX512_BF16 functions (NAME__avx512_bf16) and the int8
products' (NAME__avx2, NAME__avx_vnni, NAME__avx512_vnni) runs on
any x86-64: no AVX (VEX or EVEX encodings, ymm/zmm/mask registers),
no BMI, LZCNT, POPCNT, MOVBE or SSE3-and-later instructions. Every kernel has
its three copies. With --vectorised (a release build: -O2 and the sanitizers
leave helpers out of line), a copy calls only the PLT, itself, other
kernels' dispatchers or libtfm's BLAS call (tfm__sgemm, which only splits
the product among threads), never a helper compiled for the baseline, each
x86-64-v4 copy uses zmm registers and each x86-64-v3 copy ymm registers and
no zmm. A copy's cold part (NAME.cold) belongs to the copy.
"""
import re
import subprocess
import sys

COPIES = ('__baseline', '__x86_64_v3', '__x86_64_v4')
# Code for CPUs with AVX512_BF16 only, run after checking for it
# (lib/core/gemm_bf16.c)
BF16_ONLY = '__avx512_bf16'
# The int8 products' paths (lib/core/gemm_int8.c), each run after checking
# for its instruction sets
INT8_PATHS = ('__avx2', '__avx_vnni', '__avx512_vnni')
BLAS_CALLS = {'tfm__sgemm'}  # lib/core/gemm.h: cblas_sgemm split among threads
# Beyond the x86-64 baseline (SSE2) without a 'v' prefix or ymm/zmm operand.
LATER = set('''andn bextr blsi blsmsk blsr bzhi mulx pdep pext rorx sarx shlx shrx lzcnt tzcnt
popcnt movbe addsubps addsubpd haddps haddpd hsubps hsubpd lddqu movddup movshdup movsldup
pabsb pabsw pabsd palignr phaddw phaddd phaddsw phsubw phsubd phsubsw pmaddubsw pmulhrsw
pshufb psignb psignw psignd blendps blendpd blendvps blendvpd dpps dppd extractps insertps
movntdqa mpsadbw packusdw pblendvb pblendw pcmpeqq pextrb pextrd pextrq phminposuw pinsrb
pinsrd pinsrq pmaxsb pmaxsd pmaxud pmaxuw pminsb pminsd pminud pminuw pmovsxbw pmovsxbd
pmovsxbq pmovsxwd pmovsxwq pmovsxdq pmovzxbw pmovzxbd pmovzxbq pmovzxwd pmovzxwq pmovzxdq
pmuldq pmulld ptest roundps roundpd roundss roundsd pcmpgtq pcmpestri pcmpestrm pcmpistri
pcmpistrm crc32'''.split())


def functions(library):
    """{name: [(mnemonic, operands)]} from objdump -d."""
    text = subprocess.run(['objdump', '-d', '--no-show-raw-insn', library], check=True,
                          capture_output=True, text=True).stdout
    out, current = {}, None
    for line in text.splitlines():
        head = re.match(r'^[0-9a-f]+ <(.+)>:$', line)
        if head:
            current = out.setdefault(head.group(1), [])
            continue
        insn = re.match(r'^\s+[0-9a-f]+:\t(\S+)\s*(.*)$', line)
        if insn and current is not None:
            current.append((insn.group(1), insn.group(2)))
    return out


def beyond_baseline(mnemonic, operands):
    name = mnemonic.split('.')[0]
    return ((name.startswith('v') and name not in ('verr', 'verw'))
            or re.search(r'%[yz]mm|%k[0-7]', operands) is not None or name in LATER)


def main():
    library, vectorised = sys.argv[1], '--vectorised' in sys.argv[2:]
    funcs = functions(library)
    kernels = {name[:-len('__baseline')] for name in funcs if name.endswith('__baseline')}
    rules = {'baseline elsewhere': [], 'three copies': []}
    if vectorised:
        rules['helpers inlined'] = []
        rules['copies vectorised'] = []
    if not kernels:
        rules['three copies'].append('no kernel copies (a -Dnative=true build?)')
    for name, insns in funcs.items():
        wide = sorted({m for m, ops in insns if beyond_baseline(m, ops)})
        if wide and not name.split('.')[0].endswith(COPIES[1:] + (BF16_ONLY,) + INT8_PATHS):
            rules['baseline elsewhere'].append(f'{name}: {" ".join(wide[:8])}')
    for kernel in sorted(kernels):
        for suffix in COPIES:
            if kernel + suffix not in funcs:
                rules['three copies'].append(f'{kernel}: no {suffix} copy')
            if not vectorised:
                continue
            for mnemonic, operands in funcs.get(kernel + suffix, []):
                target = re.search(r'<([^>+]+)>$', operands)
                callee = target and target.group(1)
                if (mnemonic.startswith(('call', 'jmp')) and callee and
                        not (callee.endswith('@plt') or callee in kernels or
                             callee in BLAS_CALLS)):
                    rules['helpers inlined'].append(f'{kernel}{suffix} calls {callee}')
        if vectorised:
            v4 = ' '.join(ops for _, ops in funcs.get(kernel + '__x86_64_v4', []))
            v3 = ' '.join(ops for _, ops in funcs.get(kernel + '__x86_64_v3', []))
            if '%zmm' not in v4:
                rules['copies vectorised'].append(f'{kernel}__x86_64_v4 uses no zmm register')
            if '%ymm' not in v3 or '%zmm' in v3:
                rules['copies vectorised'].append(f'{kernel}__x86_64_v3: no ymm, or zmm')
    failed = 0
    for rule, problems in rules.items():
        for p in problems:
            print(f'{rule}: {p}')
        failed += bool(problems)
    print(f'{len(kernels)} kernels in three copies; {len(funcs)} functions checked')
    print(f'{len(rules) - failed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
