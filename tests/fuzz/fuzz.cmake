# fuzz.cmake — the fuzz targets (tests/fuzz) from the main build: when clang links
# -fsanitize=fuzzer (Debian: clang, libclang-rt-14-dev), tests/fuzz is built as a project of its
# own with it, and each target runs AT_FUZZ_SECONDS as a ctest test labelled fuzz; otherwise the
# tests are there and report Skipped, saying why. Included by tests/CMakeLists.txt.
option(AT_FUZZ "Build the libFuzzer targets (tests/fuzz) when clang with libFuzzer is found" ON)
set(AT_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzz target runs in ctest")
set(AT_FUZZ_TARGETS expr space record recording bundle)

set(at_fuzz_missing "")
if(NOT AT_FUZZ)
  set(at_fuzz_missing "fuzz targets turned off (-DAT_FUZZ=OFF)")
elseif(AT_SANITIZE)
  set(at_fuzz_missing "the fuzz targets run in the plain build (this one is -DAT_SANITIZE=ON)")
else()
  if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
    set(AT_FUZZ_CC ${CMAKE_C_COMPILER})
  else()
    find_program(AT_FUZZ_CC NAMES clang clang-16 clang-15 clang-14 DOC "clang for the fuzz targets")
  endif()
  if(NOT AT_FUZZ_CC)
    set(at_fuzz_missing "no clang found for the fuzz targets (Debian: clang libclang-rt-14-dev)")
  else()
    # Debian's clang links -fsanitize=fuzzer only with libclang-rt-NN-dev installed.
    set(probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz-probe)
    file(WRITE ${probe}.c "#include <stddef.h>\n#include <stdint.h>\n"
         "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
    execute_process(COMMAND ${AT_FUZZ_CC} -fsanitize=fuzzer,address,undefined ${probe}.c -o ${probe}
                    RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
    if(NOT probe_rc EQUAL 0)
      set(at_fuzz_missing "${AT_FUZZ_CC} cannot link -fsanitize=fuzzer (Debian: libclang-rt-14-dev)")
    endif()
  endif()
endif()

set(at_fuzz_bin ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
if(at_fuzz_missing)
  message(STATUS "Fuzz targets: off, their tests will be skipped: ${at_fuzz_missing}")
else()
  message(STATUS "Fuzz targets: built with ${AT_FUZZ_CC}, ${AT_FUZZ_SECONDS} s each in ctest -L fuzz")
  include(ExternalProject)
  ExternalProject_Add(fuzz_targets
    SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz
    BINARY_DIR ${at_fuzz_bin}
    CMAKE_ARGS -DCMAKE_C_COMPILER=${AT_FUZZ_CC} -DCMAKE_BUILD_TYPE=RelWithDebInfo
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON)
endif()

foreach(t ${AT_FUZZ_TARGETS})
  if(at_fuzz_missing)
    set(bin "")
  else()
    set(bin ${at_fuzz_bin}/fuzz_${t})
  endif()
  add_test(NAME fuzz_${t}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh "${bin}"
                   ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${t}
                   ${CMAKE_CURRENT_BINARY_DIR}/fuzz-work/${t} ${AT_FUZZ_SECONDS} "${at_fuzz_missing}")
  math(EXPR timeout "${AT_FUZZ_SECONDS} + 120")
  set_tests_properties(fuzz_${t} PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
endforeach()
