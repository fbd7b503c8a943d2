# Runs one fuzz target for SECONDS seconds from a fresh copy of its committed corpus, so that
# what the run finds goes into the copy and never into the repository; fails on any crash, leak,
# timeout (an input over 10 s) or broken property, and says where the input that did it is.
#   cmake -DFUZZER=<binary> -DCORPUS=<dir> -DWORK_DIR=<dir> -DSECONDS=<n> -P run_fuzzer.cmake
foreach(var IN ITEMS FUZZER CORPUS WORK_DIR SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${var}=... is missing")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/corpus" "${WORK_DIR}/artifacts")
file(GLOB seeds "${CORPUS}/*")
if(NOT seeds)
  message(FATAL_ERROR "run_fuzzer.cmake: the committed corpus ${CORPUS} is empty")
endif()
file(COPY ${seeds} DESTINATION "${WORK_DIR}/corpus")

execute_process(COMMAND "${FUZZER}" -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=3072 -print_final_stats=1
                        "-artifact_prefix=${WORK_DIR}/artifacts/" "${WORK_DIR}/corpus" RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  file(GLOB found "${WORK_DIR}/artifacts/*")
  message(FATAL_ERROR "${FUZZER} failed (${result}); reproduce with: ${FUZZER} ${found}")
endif()
