// SPDX-License-Identifier: Apache-2.0
/* What help2man reads: --help and --version. */
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    puts("hello 1.0");
    return 0;
  }
  puts("Usage: hello [--help] [--version]\n\nSays hello.");
  return 0;
}
