# ctest driver: builds and runs the consumer project one way in (MODE), from scratch in WORK_DIR.
#   cmake -DMODE=find_package|add_subdirectory -DSOURCE_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -P run.cmake
file(REMOVE_RECURSE "${WORK_DIR}")

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    string(REPLACE ";" " " command "${ARGV}")
    message(FATAL_ERROR "failed (${result}): ${command}")
  endif()
endfunction()

set(consumer_args -DCHUNKSAMPLER_MODE=${MODE})
if(MODE STREQUAL "find_package")
  # Install chunksampler alone into a private prefix, then find it there.
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/lib" -DCHUNKSAMPLER_BUILD_TESTS=OFF
      -DCHUNKSAMPLER_BUILD_EXAMPLES=OFF "-DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix")
  run("${CMAKE_COMMAND}" --install "${WORK_DIR}/lib")
  list(APPEND consumer_args "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
else()
  list(APPEND consumer_args "-DCHUNKSAMPLER_SOURCE_DIR=${SOURCE_DIR}")
endif()

run("${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer" ${consumer_args})
run("${CMAKE_COMMAND}" --build "${WORK_DIR}/consumer")
run("${WORK_DIR}/consumer/consumer")
