// SPDX-License-Identifier: Apache-2.0
// main() of a test program whose workers are the program itself, exec'd again
// (exec_workers.h): with `--tally-worker NAME RANK ...` it runs that worker and exits; otherwise
// it runs the gtest tests, as gtest_main would.
#include <gtest/gtest.h>

#include "test/support/exec_workers.h"

int main(int argc, char** argv) {
  tally::functional::runWorkerIfAsked(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
