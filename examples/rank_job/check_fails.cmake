# ctest runs this: `rank_job --check` must fail (exit status 1) and say why.
#   cmake -DRANK_JOB=rank_job -DARGS="--check ..." -DREASON=regex -P check_fails.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND "${RANK_JOB}" ${args} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
message("${output}")
if(NOT result EQUAL 1 OR NOT output MATCHES "${REASON}")
  message(FATAL_ERROR "expected exit status 1 and \"${REASON}\"; got ${result}")
endif()
