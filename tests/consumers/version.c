/* The smallest consumer: its headers' version against the library's. */
#include <stdio.h>
#include <tfm/tfm.h>

int main(void)
{
    printf("libtfm %s\n", tfm_version_string());
    return tfm_version_number() == TFM_VERSION_NUMBER ? 0 : 1;
}
