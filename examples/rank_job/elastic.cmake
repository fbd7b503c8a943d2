# ctest runs this: an elastic restart from 4 ranks to 3 through a checkpoint file.
#   cmake -DMPIEXEC=mpirun -DRANK_JOB=rank_job_mpi -DWORK=dir -DJOB="options" -P elastic.cmake
separate_arguments(job UNIX_COMMAND "${JOB}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

# Runs `mpirun -np <ranks> rank_job <job> <args>`, prints its output and stops unless it passed.
function(run_job title ranks)
  execute_process(COMMAND "${MPIEXEC}" --oversubscribe -np ${ranks} "${RANK_JOB}" ${job} ${ARGN}
                  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  message("${title}\n${output}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${title} exited with ${result}")
  endif()
  set(output "${output}" PARENT_SCOPE)
endfunction()

run_job("run on 4 ranks, stopped after 37 batches of epoch 0:" 4 --epochs 2 --stop-after 37 --checkpoint
        "${WORK}/job.state" --out "${WORK}/part1")
# save_state's file: a header with the state's size and CRC-32C, then the state's line.
file(STRINGS "${WORK}/job.state" checkpoint)
list(LENGTH checkpoint lines)
if(NOT lines EQUAL 2)
  message(FATAL_ERROR "FAIL: the checkpoint has ${lines} lines, not a header and a state")
endif()
list(GET checkpoint 0 header)
list(GET checkpoint 1 state)
message("checkpoint: ${header}\nstate: ${state}")
if(NOT header MATCHES "^chunksampler-checkpoint/1 bytes=[0-9]+ crc32c=[0-9a-f]+$" OR NOT state MATCHES
                                                                                      " batches_done=37 ")
  message(FATAL_ERROR "FAIL: not save_state's checkpoint of the state after 37 batches")
endif()
run_job("restart on 3 ranks:" 3 --epochs 2 --resume "${WORK}/job.state" --after "${WORK}/part1" --out "${WORK}/part2")
if(NOT output MATCHES "epoch 0: [0-9]+ observations of [0-9]+ read once each by 2 runs")
  message(FATAL_ERROR "the restarted run did not check epoch 0 over both runs")
endif()
