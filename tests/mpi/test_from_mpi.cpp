// mpi.hpp: rank and world size from an MPI communicator, in a one-process job.
#include <chunksampler.hpp>
#include <chunksampler/mpi.hpp>

#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cs = chunksampler;

TEST_CASE("from_mpi gives rank 0 of 1 in a one-process job", "[mpi]") {
  int initialized = 0;
  MPI_Initialized(&initialized);
  REQUIRE(initialized != 0);

  STATIC_REQUIRE(cs::DistInfoSource<cs::dist::MpiDistInfo>);
  REQUIRE(cs::dist::from_mpi()() == cs::DistInfo{.rank = 0, .world_size = 1});
  REQUIRE(cs::dist::from_mpi(MPI_COMM_WORLD)() == cs::DistInfo{.rank = 0, .world_size = 1});
  REQUIRE(cs::dist::from_mpi(MPI_COMM_SELF)() == cs::DistInfo{.rank = 0, .world_size = 1});
}

TEST_CASE("from_mpi reads the communicator it is given", "[mpi]") {
  // a communicator of its own (a duplicate) answers the same as the world it came from
  MPI_Comm dup = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
  const cs::DistInfo info = cs::dist::from_mpi(dup)();
  MPI_Comm_free(&dup);
  int rank = -1;
  int size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  REQUIRE(info == cs::DistInfo{.rank = rank, .world_size = size});
}

TEST_CASE("a DistributedSampler built with from_mpi reads the whole data set on one rank", "[mpi]") {
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 10, .seed = 1});
  cs::DistributedSampler dist(base, cs::dist::from_mpi());
  REQUIRE(dist.rank() == 0);
  REQUIRE(dist.world_size() == 1);
  REQUIRE(dist.shard(107) == cs::Slice{0, 100});  // whole batches: 107 rounds down to 100
  REQUIRE(dist.n_batches(107) == 10);

  std::vector<int> seen(107, 0);
  std::int64_t batches = 0;
  for (const cs::LoadRequest& request : dist.sample(107)) {
    batches += static_cast<std::int64_t>(request.splits.size());
    for (const cs::Slice& chunk : request.chunks)
      for (std::int64_t obs = chunk.start; obs < chunk.stop; ++obs) ++seen[static_cast<std::size_t>(obs)];
  }
  REQUIRE(batches == 10);
  for (std::size_t obs = 0; obs < seen.size(); ++obs) {
    CAPTURE(obs);
    REQUIRE(seen[obs] == (obs < 100 ? 1 : 0));
  }

  cs::DistributedSampler loose(base, cs::dist::from_mpi(), {.enforce_equal_batches = false});
  REQUIRE(loose.shard(107) == cs::Slice{0, 107});
  REQUIRE(loose.n_batches(107) == 11);
}
