# ctest runs this: a command must exit with CODE and print (stdout and stderr together) a match for
# the regular expression EXPECT. A PASS_REGULAR_EXPRESSION alone would ignore the exit status, and
# WILL_FAIL would take a crash for a pass.
#   cmake "-DCOMMAND=program|arg|..." -DCODE=2 "-DEXPECT=regex" -P expect.cmake
# The command goes through -D as one argument, "|" standing for the list's ";".
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE errors)
message("${output}${errors}")
if(NOT result EQUAL "${CODE}" OR NOT "${output}${errors}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "expected exit code ${CODE} and output matching \"${EXPECT}\"; got exit code ${result}")
endif()
