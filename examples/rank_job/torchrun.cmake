# ctest runs this: torchrun starts 3 ranks of rank_job, each writes its reads, then the check.
#   cmake -DTORCHRUN=torchrun -DRANK_JOB=rank_job -DWORK=dir -DJOB="options" -P torchrun.cmake
separate_arguments(job UNIX_COMMAND "${JOB}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/logs")
# Debian's torchrun (torch 1.13 on Python 3.11) cannot parse its default --redirects/--tee of 0,
# so the output is teed explicitly; --no_python is the spelling it knows (newer ones take both).
execute_process(COMMAND "${TORCHRUN}" --standalone --nproc_per_node=3 --log_dir "${WORK}/logs" --redirects 1 --tee 1
                        --no_python "${RANK_JOB}" --out "${WORK}/reads" ${job} RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "torchrun exited with ${result}")
endif()
file(GLOB written "${WORK}/reads/rank-*.txt")
list(LENGTH written ranks)
if(NOT ranks EQUAL 3)
  message(FATAL_ERROR "torchrun's ranks wrote ${ranks} reads files, not 3")
endif()
execute_process(COMMAND "${RANK_JOB}" --check "${WORK}/reads" ${job} RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "rank_job --check exited with ${result}")
endif()
