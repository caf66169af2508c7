/* Failure injection for the file calls a save makes: the test binary
 * interposes open, write, fsync, rename and close (the symbols libtfm
 * imports); while armed, each call is counted and the chosen one fails. */
#ifndef TFM_TESTS_FILE_FAULTS_H
#define TFM_TESTS_FILE_FAULTS_H

/* Counts calls from now on; the fail_at-th (from 1; 0: none) fails with
 * error. With short_writes, every write transfers at most half of what it
 * is asked (at least one byte), as a full pipe or a signal can make it. */
void file_faults_arm(long fail_at, int error, int short_writes);
/* Stops counting; returns the calls made while armed. */
long file_faults_disarm(void);
/* The name of the call made to fail ("open", "write", …), or NULL. */
const char *file_faults_failed(void);

#endif
