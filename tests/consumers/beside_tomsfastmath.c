/* One program using Debian's TomsFastMath (tfm.h, -ltfm) and libtfm (tfm/tfm.h,
 * tfm.pc) at once: each call reaches its own library. */
#include <stdio.h>
#include <tfm.h>
#include <tfm/tfm.h>
int main(void)
{
    fp_int a, b, c;
    fp_init(&a); fp_init(&b); fp_init(&c);
    fp_set(&a, 6); fp_set(&b, 7); fp_mul(&a, &b, &c);
    char text[16];
    fp_toradix(&c, text, 10);
    printf("TomsFastMath 6 x 7 = %s; libtfm %s\n", text, tfm_version_string());
    return 0;
}
