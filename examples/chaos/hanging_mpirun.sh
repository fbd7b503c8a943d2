#!/bin/sh
# A launcher that never ends, nor does the process it starts: the chaos driver must call the
# launch a hang and kill both (ctest chaos.catches_hangs).
sleep 600 &
wait
