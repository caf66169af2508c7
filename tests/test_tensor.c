#include "check_main.h"
static Suite *s(void){return suite_create("placeholder");}
TFM_CHECK_MAIN(s)
