# SPDX-License-Identifier: Apache-2.0
# Sanitizer builds, for every target (compile and link):
#   -DTALLY_SANITIZE=address,undefined   ASan + UBSan (make test-asan)
#   -DTALLY_SANITIZE=thread              ThreadSanitizer (make test-tsan)
# Any list -fsanitize= takes works; empty (the default) builds without. Undefined behaviour is made
# fatal (-fno-sanitize-recover=undefined), so a report fails the test that triggered it instead of
# scrolling by. Included from the top-level CMakeLists.txt before any target is defined;
# cmake/fuzz.cmake may have chosen a value first (TALLY_FUZZ=ON implies address,undefined).
set(TALLY_SANITIZE "${TALLY_SANITIZE}" CACHE STRING
    "Sanitizers for every target: address,undefined or thread (empty: none)")

if(TALLY_SANITIZE)
  string(REPLACE ";" "," tally_sanitize "${TALLY_SANITIZE}")
  if(tally_sanitize MATCHES "thread" AND tally_sanitize MATCHES "address")
    message(FATAL_ERROR "TALLY_SANITIZE: thread cannot be combined with address")
  endif()
  message(STATUS "Sanitizers: ${tally_sanitize}")
  add_compile_options(-fsanitize=${tally_sanitize} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${tally_sanitize})
  if(tally_sanitize MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
    add_link_options(-fno-sanitize-recover=undefined)
  endif()
  # GCC's -Wmaybe-uninitialized sees through the sanitizers' extra code paths and reports
  # false positives (in libstdc++'s <regex>, for one); the normal build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  # GCC warns that TSan does not model std::atomic_thread_fence (-Wtsan). Keep the warning visible
  # but not fatal under TALLY_WERROR: a fence TSan cannot see shows up as a race report instead.
  if(tally_sanitize MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-error=tsan>)
  endif()
endif()
