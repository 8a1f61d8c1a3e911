// The process group of a data-parallel run: rank, size and the collectives temper needs (sum
// all-reduce of a flat buffer, broadcast, all-gather of byte strings, barrier, abort). Two
// implementations: one process (every collective is the identity) and MPI (OpenMPI from Debian;
// `mpirun -np N temper train ...`). A NCCL one comes with the CUDA backend behind the same interface.
// MPI types never leave dist/: callers see bytes, floats and doubles.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace temper::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_size() const { return 1; }  // ranks on this machine (threads per rank follow from it)
  virtual const char* backend() const = 0;
  // Element-wise sum over ranks, in place; every rank ends with the same values. Large buffers go in
  // buckets (MPI: at most kBucketBytes each, mpi_communicator.cpp).
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  virtual void allreduce_max(double* data, int64_t n) = 0;
  virtual void broadcast(float* data, int64_t n, int root) = 0;
  virtual void broadcast(std::string& bytes, int root) = 0;
  // Every rank's bytes, in rank order, on every rank.
  virtual std::vector<std::string> allgather(const std::string& bytes) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the group with this exit code (a rank that failed must not leave the others
  // waiting in a collective).
  [[noreturn]] virtual void abort(int code) = 0;

  // Sharded collectives (ZeRO-1: model/optimizer.h). A buffer of n floats is cut into buckets of kShardBucket
  // floats and each bucket into size() contiguous pieces, rank r holding piece r of every bucket (pieces(n): this
  // rank's (offset, length) pieces in order; a rank's shard is about n / size() floats).
  // reduce_scatter_sum: this rank's pieces of `data` become the element-wise sums over ranks (the rest of `data`
  // is left undefined). allgather_pieces: every rank's pieces copied into every rank's `data`. gather_pieces:
  // `packed` (this rank's pieces, back to back) assembled into `full` (n floats) on `root` (ignored elsewhere).
  // One process: identities.
  static constexpr int64_t kShardBucket = int64_t{16} << 20;
  std::vector<std::pair<int64_t, int64_t>> pieces(int64_t n) const;
  // Rank r's piece [first, second) of a bucket of L floats split N ways (offsets from the bucket's start).
  static std::pair<int64_t, int64_t> piece_of(int64_t L, int64_t r, int64_t N) { return {L * r / N, L * (r + 1) / N}; }
  virtual void reduce_scatter_sum(float* data, int64_t n);
  virtual void allgather_pieces(float* data, int64_t n);
  virtual void gather_pieces(const float* packed, float* full, int64_t n, int root);

  // Sub-groups and point-to-point (the roles of [rl.async]'s explorer ranks, rl/async_remote.h). split: the ranks
  // with the same `color` form a new group, ordered by `key` (every rank of this group must call it; abort() of the
  // new group still ends every rank of the process). send/recv: bytes or floats to / from one rank of this group,
  // matched by `tag` (>= 0); a recv of floats must name the sender's count. isend: the same, returning at once;
  // the buffer must live, unchanged, until wait_sends() returns (double buffering of weights). One process:
  // split gives a one-process group, point-to-point has no peer and fails.
  virtual std::unique_ptr<Communicator> split(int color, int key);
  virtual void send(const std::string& bytes, int dest, int tag);
  virtual void recv(std::string& bytes, int src, int tag);
  virtual void send(const float* data, int64_t n, int dest, int tag);
  virtual void isend(const float* data, int64_t n, int dest, int tag);
  virtual void wait_sends() {}
  virtual void recv(float* data, int64_t n, int src, int tag);

  bool is_root() const { return rank() == 0; }
  // What this rank has sent through collectives (payload bytes) and the wall time spent in them
  // (waiting for slower ranks included): the communication cost of a step, as metrics.
  int64_t bytes_sent() const { return bytes_; }
  double seconds() const { return seconds_; }

 protected:
  int64_t bytes_ = 0;
  double seconds_ = 0;
};

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "single"; }
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_sum(double*, int64_t) override {}
  void allreduce_max(double*, int64_t) override {}
  void broadcast(float*, int64_t, int) override {}
  void broadcast(std::string&, int) override {}
  std::vector<std::string> allgather(const std::string& bytes) override { return {bytes}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
};

// This process's index among the ranks on its machine, as the launcher says
// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID; 0 when none does): GPU selection.
int local_rank();
// True when the environment says an MPI launcher started this process.
bool launched_by_mpi();
// Unsets the variables launched_by_mpi reads: a child this process starts (an [rl.async] explorer) is no MPI rank.
// Before any thread exists (the environment is that thread's to change).
void forget_mpi_launch();
// Whether this build has the MPI implementation.
bool mpi_available();
// world() is the process-wide group: MPI when the binary was built with MPI and started by mpirun
// (OMPI_COMM_WORLD_SIZE / PMI_SIZE / PMIX_RANK in the environment), else a single process.
// The process-wide group (created on first use; MPI_Init then, MPI_Finalize at exit).
Communicator& world();
// A single-process group (tests compare a data-parallel run with one).
Communicator& single();
// The group this rank works in: world() unless a role split narrowed it (set_group, before anything else uses
// it: [rl.async]'s explorer ranks, rl/async_remote.h); role() says which, and where the explorers start.
struct Role {
  bool explorer = false;
  int first_explorer = 0;  // > 0 once split: world ranks [first_explorer, size) explore
};
Communicator& group();
const Role& role();
void set_group(std::unique_ptr<Communicator> g, Role r);

// The rows [begin, end) of n that `rank` of `size` owns: contiguous blocks, sizes differ by at most 1.
struct Range {
  int64_t begin = 0, end = 0;
};
Range shard(int64_t n, int rank, int size);
inline Range shard(int64_t n, const Communicator& c) {
  return shard(n, c.rank(), c.size());
}

// The ranks whose `bytes` differ from rank 0's, in order (collective: every rank calls it and gets the answer).
// What every rank must hold alike but builds on its own (a base quantised from its own read of a file) is checked
// by a digest of it.
std::vector<int> ranks_unlike_root(Communicator& c, const std::string& bytes);

}  // namespace temper::dist
