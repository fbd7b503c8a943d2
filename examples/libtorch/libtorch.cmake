# ctest runs this (example.libtorch.train): train_h5ad on RANKS ranks, uninterrupted, then stopped
# after STOP_AFTER batches and resumed from its checkpoint. The expected counts come from the
# documented formulas (docs/concepts/shard-modes.md), not from the library: contiguous shards of round_down(N_OBS / RANKS,
# BATCH_SIZE) rows, read in chunks of CHUNK_SIZE, PRELOAD chunks per request.
#   cmake -DMPIEXEC=mpirun -DTRAIN=train_h5ad -DFILE=cells.h5ad -DN_OBS=5003 -DRANKS=2 -DCHUNK_SIZE=100
#         -DPRELOAD=2 -DBATCH_SIZE=40 -DSTOP_AFTER=23 -DWORK=dir -P libtorch.cmake
set(job --chunk-size ${CHUNK_SIZE} --preload ${PRELOAD} --batch-size ${BATCH_SIZE} --epochs 2 --workers 2)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(train out)
  execute_process(COMMAND "${MPIEXEC}" --oversubscribe -np ${RANKS} "${TRAIN}" "${FILE}" ${job} ${ARGN}
                  RESULT_VARIABLE code OUTPUT_VARIABLE output ERROR_VARIABLE errors)
  message("$ train_h5ad ${ARGN}\n${output}${errors}")
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "FAIL: train_h5ad ${ARGN} exited with ${code}")
  endif()
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

# The epoch lines of `output`, as "epoch E rank R: B batches, O observations, C chunk reads, checksum X".
function(epoch_lines output out)
  string(REGEX MATCHALL "epoch [0-9]+ rank [0-9]+: [0-9]+ batches, [0-9]+ observations, [0-9]+ chunk reads, checksum [0-9a-f]+"
               lines "${output}")
  list(LENGTH lines n)
  math(EXPR want "2 * ${RANKS}")
  if(NOT n EQUAL want)
    message(FATAL_ERROR "FAIL: ${n} epoch lines, expected ${want}")
  endif()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

math(EXPR shard "${N_OBS} / ${RANKS} / ${BATCH_SIZE} * ${BATCH_SIZE}")
math(EXPR batches "${shard} / ${BATCH_SIZE}")
math(EXPR requests "(${shard} + ${CHUNK_SIZE} * ${PRELOAD} - 1) / (${CHUNK_SIZE} * ${PRELOAD})")

# The chunk reads of one epoch line: the grid chunks of the rank's shard [r * shard, (r + 1) * shard)
# (cells of CHUNK_SIZE rows from row 0, cut to the shard), each read once, or in two pieces when it
# straddles two requests: between the shard's grid chunks and that plus one per request boundary.
function(check_chunk_reads line)
  string(REGEX MATCH "rank ([0-9]+):" _ "${line}")
  set(rank ${CMAKE_MATCH_1})
  string(REGEX MATCH "([0-9]+) chunk reads" _ "${line}")
  set(reads ${CMAKE_MATCH_1})
  math(EXPR first "${rank} * ${shard}")
  math(EXPR last "(${rank} + 1) * ${shard} - 1")
  math(EXPR cells "${last} / ${CHUNK_SIZE} - ${first} / ${CHUNK_SIZE} + 1")
  math(EXPR most "${cells} + ${requests} - 1")
  if(reads LESS cells OR reads GREATER most)
    message(FATAL_ERROR "FAIL: \"${line}\": ${reads} chunk reads, expected ${cells} grid chunks of the rank's shard, "
                        "read in at most ${most} pieces")
  endif()
endfunction()

train(full)
epoch_lines("${full}" full_lines)
foreach(line IN LISTS full_lines)
  if(NOT line MATCHES ": ${batches} batches, ${shard} observations, [0-9]+ chunk reads,")
    message(FATAL_ERROR "FAIL: \"${line}\": expected ${batches} batches and ${shard} observations on every rank")
  endif()
  check_chunk_reads("${line}")
endforeach()

train(stopped --checkpoint "${WORK}/job.pt" --stop-after ${STOP_AFTER})
if(NOT stopped MATCHES "stopped in epoch 0 after batch ${STOP_AFTER};")
  message(FATAL_ERROR "FAIL: the job did not stop after ${STOP_AFTER} batches")
endif()
# cs::write_atomically renames its temporary file over job.pt: none is left beside it.
file(GLOB leftovers "${WORK}/*")
if(NOT leftovers STREQUAL "${WORK}/job.pt")
  message(FATAL_ERROR "FAIL: the work directory holds ${leftovers}, not job.pt alone")
endif()
train(resumed --checkpoint "${WORK}/job.pt" --resume)
epoch_lines("${resumed}" resumed_lines)
foreach(full_line resumed_line IN ZIP_LISTS full_lines resumed_lines)
  # Batches, observations and checksum count from the epoch's start: the same as uninterrupted.
  string(REGEX REPLACE "[0-9]+ chunk reads" "" full_rest "${full_line}")
  string(REGEX REPLACE "[0-9]+ chunk reads" "" resumed_rest "${resumed_line}")
  if(NOT full_rest STREQUAL resumed_rest)
    message(FATAL_ERROR "FAIL: resumed \"${resumed_line}\", uninterrupted \"${full_line}\"")
  endif()
  # The resumed epoch 0 reads again the request the stop cut and those after it: fewer pieces
  # than the whole epoch; epoch 1 reads exactly what the uninterrupted run read.
  string(REGEX MATCH "([0-9]+) chunk reads" _ "${full_line}")
  set(full_reads ${CMAKE_MATCH_1})
  string(REGEX MATCH "([0-9]+) chunk reads" _ "${resumed_line}")
  set(resumed_reads ${CMAKE_MATCH_1})
  if(resumed_line MATCHES "^epoch 0")
    if(NOT resumed_reads LESS full_reads)
      message(FATAL_ERROR "FAIL: \"${resumed_line}\": the resumed epoch read ${resumed_reads} chunks, "
                          "the whole epoch ${full_reads}")
    endif()
  elseif(NOT resumed_reads EQUAL full_reads)
    message(FATAL_ERROR "FAIL: \"${resumed_line}\": expected ${full_reads} chunk reads, as uninterrupted")
  endif()
endforeach()
message("PASS: ${RANKS} ranks read each grid chunk of their shard once per epoch (${batches} batches); "
        "stopped after ${STOP_AFTER} batches and resumed, the job trained the same batches")
