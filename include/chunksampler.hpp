// SPDX-License-Identifier: MIT
#pragma once

/// chunksampler: chunk samplers that plan contiguous reads and shuffled batches for
/// data-parallel training. Include this for everything but `<chunksampler/mpi.hpp>`.

#include <chunksampler/class_code.hpp>
#include <chunksampler/class_options.hpp>
#include <chunksampler/class_sampler.hpp>
#include <chunksampler/dist_info.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/epoch.hpp>
#include <chunksampler/epoch_driver.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/load_request.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_base.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/sequential_sampler.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/split.hpp>
#include <chunksampler/version.hpp>
#include <chunksampler/weighted_class_sampler.hpp>
#include <chunksampler/worker_info.hpp>
